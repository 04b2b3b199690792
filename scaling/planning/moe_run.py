"""The MoE run a plan recommends: a model designed at the MoE optimum, and its config.

Default (`designed`): a dense shape of a models.design rule (marin unless --shape-rule) made MoE
with the plan's E experts, top_k and expert d_ff = d_ff / G, its width searched so that the
*active* non-embedding count is N_opt. --presets-only: each preset becomes an MoE with the plan's E experts,
top_k and expert d_ff = preset d_ff / G
(presets whose d_ff G does not divide are skipped) plus the fitted runs' other `model.moe`
settings (router, capacity factor, ...: the record's `moe_recipe`). Its active non-embedding
parameters N (models.accounting, torch-free) set its tokens D = C / (6 N) in the plan's
convention. Krajewski: the preset with the lowest predicted loss at C; Clark (no data term): the
one nearest N_opt in log scale. `to_moe_train_config` goes through `scaling.planning.emit.to_train_config`
(the one way a plan becomes a train config) and adds the `model.moe` section; `emit_moe_config`
writes it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from models.accounting import model_counts
from models.config import ModelConfig
from models.design import DEFAULT_RULE, design
from scaling.core.errors import InputError
from scaling.fits.moe.prediction import predict_run_loss
from scaling.planning.emit import to_train_config
from scaling.planning.record import PlanRecord
from scaling.planning.run_model import configs_dir, default_vocab_size, recipe_vocab, run_label


def designed(raw_moe: dict, N_opt: float, G: float, vocab: int, seq_len: int | None, rule: str | None, tie: bool):
    """The MoE designed at its optimum: a dense shape (models.design, `rule`, default marin) made MoE
    with E experts of d_ff / G and top_k, its width chosen so that its *active* non-embedding count
    is N_opt (two rounds: design at a target, count the MoE, rescale the target)."""
    target = N_opt
    for _ in range(3):
        d = design(
            target,
            rule or DEFAULT_RULE,
            n_kind="non_embedding",
            vocab_size=vocab,
            seq_len=int(seq_len or 2048),
            tie_embeddings=tie,
        )
        dense = d.model
        moe = {**raw_moe, "d_ff": max(1, int(round(dense.ffn_dim / G)))}
        cfg = ModelConfig(**{**d.model_dict(), "moe": moe})
        c = model_counts(cfg, vocab)
        ratio = N_opt / c.active_non_embedding
        if abs(ratio - 1) < 0.01:
            break
        target *= ratio
    return d, cfg, c, moe


def _designed(settings, E, top_k, plan, G, vocab, seq_len, shape_rule, tie, loss_at) -> dict:
    """The run designed at N_opt (models.design's shape rule) with E experts of granularity G."""
    moe = {**settings, "num_experts": int(E), "top_k": top_k}
    try:
        d, cfg, c, moe = designed(moe, plan["N_opt"], G, vocab, seq_len, shape_rule, tie)
    except ValueError as exc:
        raise InputError(f"cannot design an MoE model at N_opt {plan['N_opt']:.3g}: {exc}") from exc
    n = float(c.active_non_embedding)
    tokens = plan["compute"] / (6.0 * n)
    model = {k: getattr(cfg, k) for k in ("d_model", "n_layers", "n_heads", "vocab_size", "seq_len", "tie_embeddings")}
    model.update(n_kv_heads=cfg.kv_heads, d_ff=d.model.ffn_dim, moe=moe)
    return {
        "preset": None,
        "shape_rule": d.rule,
        "model": model,
        "N": n,
        "tokens": tokens,
        "loss": loss_at(n, tokens),
        "counts": c,
        "moe": moe,
        "seq_len": cfg.seq_len,
        "d_ff": d.model.ffn_dim,
    }


def _presets(settings, E, top_k, plan, G, vocab, seq_len, loss_at) -> list[dict]:
    """Each configs/models/ preset made MoE with E experts of granularity G (a preset whose d_ff does not
    divide by G, or that cannot take the shape, is left out)."""
    found = []
    for p in sorted((configs_dir() / "models").glob("*.yaml")):
        try:
            raw = yaml.safe_load(p.read_text()) or {}
            if seq_len:
                raw["seq_len"] = seq_len
            dense_d_ff = ModelConfig(**raw).ffn_dim
            if abs(dense_d_ff / G - round(dense_d_ff / G)) > 1e-9 or dense_d_ff / G < 1:
                continue
            moe = {**settings, "num_experts": int(E), "top_k": top_k, "d_ff": int(round(dense_d_ff / G))}
            cfg = ModelConfig(**{**raw, "moe": moe})
            c = model_counts(cfg, vocab)
        except Exception:  # a preset that cannot take this shape is skipped, not fatal for planning
            continue
        n = float(c.active_non_embedding)
        tokens = plan["compute"] / (6.0 * n)
        found.append(
            {
                "preset": p.stem,
                "model": {"preset": p.stem},
                "N": n,
                "tokens": tokens,
                "loss": loss_at(n, tokens),
                "counts": c,
                "moe": moe,
                "seq_len": cfg.seq_len,
                "d_ff": dense_d_ff,
            }
        )
    return found


def choose_run(
    rec,
    plan: PlanRecord,
    vocab_size: int | None,
    ci: float,
    warnings: list[str],
    *,
    presets_only: bool = False,
    shape_rule: str | None = None,
) -> dict | None:
    E, G, top_k = plan.get("E"), float(plan["G"]), int(plan.get("top_k") or 1)
    if not E:
        return None
    recipe = rec.get("recipe") or {}
    vocab = vocab_size or recipe_vocab(recipe) or default_vocab_size()
    if not vocab:
        warnings.append("no vocabulary size (give --vocab-size): no preset run planned")
        return None
    plan["vocab_size"] = vocab
    seq_len = (recipe.get("settings") or {}).get("model.seq_len")
    settings = dict(((rec.get("moe_recipe") or {}).get("moe")) or {})
    law, name = rec.law(), rec["settings"]["law"]

    def loss_at(n: float, tokens: float) -> float:
        return float(law.predict(n, E) if name == "clark" else law.predict(n, tokens, G))

    if presets_only:
        found = _presets(settings, E, top_k, plan, G, vocab, seq_len, loss_at)
    else:
        tie = bool((recipe.get("settings") or {}).get("model.tie_embeddings"))
        found = [_designed(settings, E, top_k, plan, G, vocab, seq_len, shape_rule, tie, loss_at)]
    if not found:
        warnings.append(f"no configs/models/ preset can take G = {G:g} (its d_ff must divide by G): no run planned")
        return None
    if not presets_only:
        best, rule = found[0], "designed at N_opt (active non-embedding parameters)"
    elif name == "clark":
        best, rule = (
            min(found, key=lambda r: abs(np.log(r["N"] / plan["N_opt"]))),
            "nearest N_opt (log scale; the law has no data term)",
        )
    else:
        best, rule = min(found, key=lambda r: r["loss"]), "lowest predicted loss at this compute"
    c = best["counts"]
    pred = predict_run_loss(rec, ci, N=best["N"], D=best["tokens"], G=G, E=E)
    run = {
        "preset": best["preset"],
        "shape_rule": best.get("shape_rule"),
        "model": best["model"],
        "choice": rule,
        "n_kind": "active_non_embedding",
        "N": best["N"],
        "params": c.total,
        "active_params": c.active,
        "non_embedding_params": c.non_embedding,
        "flops_per_token": c.flops_per_token,
        "seq_len": best["seq_len"],
        "tokens": best["tokens"],
        "E": int(E),
        "G": G,
        "top_k": top_k,
        "expert_d_ff": best["moe"]["d_ff"],
        "moe": best["moe"],
        "ratio_to_N_opt": best["N"] / plan["N_opt"],
        "loss": pred["loss"],
        "loss_interval": pred["interval"],
        "loss_interval_kind": pred["interval_kind"],
        "compute": {
            "6ND_active_nonembed": 6.0 * best["N"] * best["tokens"],
            "trainer_flops": c.flops_per_token * best["tokens"],
        },
    }
    if presets_only and not 0.5 <= run["ratio_to_N_opt"] <= 2.0:
        warnings.append(
            f"the chosen preset {best['preset']} has {best['N']:.3g} active non-embedding "
            f"parameters, {run['ratio_to_N_opt']:.2g}x N_opt: no preset close to the optimum"
        )
    rng = rec.get("data_range") or {}
    if rng.get("N") and not rng["N"][0] / 2 <= best["N"] <= rng["N"][1] * 10:
        warnings.append(
            f"the planned model's N = {best['N']:.3g} is far outside "
            f"the fitted sizes {rng['N'][0]:.3g}-{rng['N'][1]:.3g}"
        )
    return run


def to_moe_train_config(plan: PlanRecord, micro_batch_size: int = 16, base: dict | None = None) -> dict:
    """The plan's MoE run as a train config: `scaling.planning.emit.to_train_config` plus `model.moe`."""
    run = plan.get("run")
    if not run:
        raise InputError(
            "the MoE plan has no preset run (no configs/models/ preset "
            "fits its shape, or no vocabulary size): cannot emit a config"
        )

    name = f"plan-moe-{run_label(run)}-e{run['E']}-g{run['G']:g}-C{plan['compute']:.0e}".replace("+", "")
    cfg = to_train_config(plan, base=base, micro_batch_size=micro_batch_size, name=name)
    cfg["model"]["moe"] = dict(run["moe"])
    if not run.get("preset"):
        cfg["model"]["d_ff"] = run["model"]["d_ff"]  # the dense width the experts were cut from
    cfg["extras"]["plan"].update(
        {
            "law": plan.get("law"),
            "E": run["E"],
            "G": run["G"],
            "top_k": run["top_k"],
            "gain": plan.get("gain"),
            "compute_multiplier": plan.get("compute_multiplier"),
            "dense": plan.get("dense"),
        }
    )
    return cfg


def emit_moe_config(plan: PlanRecord, path: str | Path, *, micro_batch_size: int = 16) -> Path:
    """Write the plan's MoE run as a train config (YAML), like `scaling.planning.emit.emit_config`."""
    cfg = to_moe_train_config(plan, micro_batch_size=micro_batch_size)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# Written by `scalelab plan --emit-config` from an MoE "
        "fit: the planned MoE run for the budget, trained with the\n"
        "# recipe (and model.moe settings) of the runs the law was fitted on.\n"
    )
    out.write_text(header + yaml.safe_dump(cfg, sort_keys=False))
    return out
