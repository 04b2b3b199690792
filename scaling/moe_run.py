"""The MoE run a plan recommends: a configs/models/ preset made MoE with the plan's shape, and its config.

Each preset becomes an MoE with the plan's E experts, top_k and expert d_ff = preset d_ff / G
(presets whose d_ff G does not divide are skipped) plus the fitted runs' other `model.moe`
settings (router, capacity factor, ...: the record's `moe_recipe`). Its active non-embedding
parameters N (models.accounting, torch-free) set its tokens D = C / (6 N) in the plan's
convention. Krajewski: the preset with the lowest predicted loss at C; Clark (no data term): the
one nearest N_opt in log scale. `to_moe_train_config` goes through `scaling.plan.to_train_config`
(the one way a plan becomes a train config) and adds the `model.moe` section.
"""
from __future__ import annotations

import numpy as np

from scaling.errors import InputError


def choose_run(rec, plan: dict, vocab_size: int | None, ci: float, warnings: list[str]) -> dict | None:
    import yaml

    from models.accounting import count
    from models.config import ModelConfig
    from scaling.moe_plan import predict_run_loss
    from scaling.plan import _recipe_vocab, configs_dir, default_vocab_size

    E, G, top_k = plan.get("E"), float(plan["G"]), int(plan.get("top_k") or 1)
    if not E:
        return None
    recipe = rec.get("recipe") or {}
    vocab = vocab_size or _recipe_vocab(recipe) or default_vocab_size()
    if not vocab:
        warnings.append("no vocabulary size (give --vocab-size): no preset run planned")
        return None
    plan["vocab_size"] = vocab
    seq_len = (recipe.get("settings") or {}).get("model.seq_len")
    settings = dict(((rec.get("moe_recipe") or {}).get("moe")) or {})
    law, name = rec.law(), rec["settings"]["law"]
    found, skipped = [], []
    for p in sorted((configs_dir() / "models").glob("*.yaml")):
        try:
            raw = yaml.safe_load(p.read_text()) or {}
            if seq_len:
                raw["seq_len"] = seq_len
            dense_d_ff = ModelConfig(**raw).ffn_dim
            if abs(dense_d_ff / G - round(dense_d_ff / G)) > 1e-9 or dense_d_ff / G < 1:
                skipped.append(p.stem)
                continue
            moe = {**settings, "num_experts": int(E), "top_k": top_k, "d_ff": int(round(dense_d_ff / G))}
            cfg = ModelConfig(**{**raw, "moe": moe})
            c = count(cfg, vocab)
        except Exception:  # a preset that cannot take this shape is skipped, not fatal for planning
            skipped.append(p.stem)
            continue
        n = float(c.active_non_embedding)
        tokens = plan["compute"] / (6.0 * n)
        loss = float(law.predict(n, E) if name == "clark" else law.predict(n, tokens, G))
        found.append({"preset": p.stem, "N": n, "tokens": tokens, "loss": loss, "counts": c, "moe": moe, "seq_len": cfg.seq_len, "d_ff": dense_d_ff})
    if not found:
        warnings.append(f"no configs/models/ preset can take G = {G:g} (its d_ff must divide by G): no run planned")
        return None
    if name == "clark":
        best, rule = min(found, key=lambda r: abs(np.log(r["N"] / plan["N_opt"]))), "nearest N_opt (log scale; the law has no data term)"
    else:
        best, rule = min(found, key=lambda r: r["loss"]), "lowest predicted loss at this compute"
    c = best["counts"]
    pred = predict_run_loss(rec, ci, N=best["N"], D=best["tokens"], G=G, E=E)
    run = {"preset": best["preset"], "choice": rule, "n_kind": "active_non_embedding", "N": best["N"], "params": c.total,
           "active_params": c.active, "non_embedding_params": c.non_embedding, "flops_per_token": c.flops_per_token, "seq_len": best["seq_len"],
           "tokens": best["tokens"], "E": int(E), "G": G, "top_k": top_k, "expert_d_ff": best["moe"]["d_ff"], "moe": best["moe"],
           "ratio_to_N_opt": best["N"] / plan["N_opt"], "loss": pred["loss"], "loss_interval": pred["interval"],
           "loss_interval_kind": pred["interval_kind"],
           "compute": {"6ND_active_nonembed": 6.0 * best["N"] * best["tokens"], "trainer_flops": c.flops_per_token * best["tokens"]}}
    if not 0.5 <= run["ratio_to_N_opt"] <= 2.0:
        warnings.append(f"the chosen preset {best['preset']} has {best['N']:.3g} active non-embedding parameters, {run['ratio_to_N_opt']:.2g}x N_opt: no preset close to the optimum")
    rng = rec.get("data_range") or {}
    if rng.get("N") and not rng["N"][0] / 2 <= best["N"] <= rng["N"][1] * 10:
        warnings.append(f"the chosen preset's N = {best['N']:.3g} is far outside the fitted sizes {rng['N'][0]:.3g}-{rng['N'][1]:.3g}")
    return run


def to_moe_train_config(plan: dict, micro_batch_size: int = 16, base: dict | None = None) -> dict:
    """The plan's MoE run as a train config: `scaling.plan.to_train_config` plus `model.moe`."""
    from scaling.plan import to_train_config

    run = plan.get("run")
    if not run:
        raise InputError("the MoE plan has no preset run (no configs/models/ preset fits its shape, or no vocabulary size): cannot emit a config")
    name = f"plan-moe-{run['preset']}-e{run['E']}-g{run['G']:g}-C{plan['compute']:.0e}".replace("+", "")
    cfg = to_train_config(plan, base=base, micro_batch_size=micro_batch_size, name=name)
    cfg["model"]["moe"] = dict(run["moe"])
    cfg["extras"]["plan"].update({"law": plan.get("law"), "E": run["E"], "G": run["G"], "top_k": run["top_k"], "gain": plan.get("gain"),
                                  "compute_multiplier": plan.get("compute_multiplier"), "dense": plan.get("dense")})
    return cfg
