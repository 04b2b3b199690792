"""The run to train at a budget, once the Chinchilla planner has N_opt: by default the model designed at N_opt
(models.design, in the family of the fitted runs' shapes), else (--presets-only) the best dense configs/models/
preset; its tokens are what the budget buys in the fit's convention, its loss the law's prediction interval."""

from __future__ import annotations

import numpy as np

from scaling.core.errors import InputError
from scaling.laws.prediction import data_constrained, predict_loss

EPOCHS_WARN = 4.0  # more epochs of the unique tokens than this: the plan warns (repeated data)


def designed_candidate(ch, n_opt, conv, vocab, seq_len, rule, warnings) -> dict:
    """The model designed at N_opt (models.design) as a run candidate: in the family of the fit's
    runs (their recipe's model shapes) unless `rule` names one of models.design.RULES."""
    from models.design import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        DEFAULT_RULE,
        ShapeRule,
        design,
        family_rule,
    )

    shapes = [m for m in (((ch.get("recipe") or {}).get("models")) or []) if not m.get("moe")]
    chosen: str | ShapeRule
    if rule in (None, "runs") and shapes:
        chosen = family_rule(shapes)
    elif rule == "runs":
        raise InputError(
            "--shape-rule runs: the fit's record names no model shapes of its runs (fitted from a table, "
            "or an older record): choose a named rule (marin, olmo-ladder)"
        )
    else:
        chosen = rule or DEFAULT_RULE
    kind = "non_embedding" if conv["n_kind"] == "non_embedding" else "total"
    tie = bool(((ch.get("recipe") or {}).get("settings") or {}).get("model.tie_embeddings"))
    try:
        d = design(n_opt, chosen, n_kind=kind, vocab_size=vocab, seq_len=int(seq_len or 2048), tie_embeddings=tie)
    except ValueError as exc:
        raise InputError(f"cannot design a model at N_opt {n_opt:.3g}: {exc}") from exc
    warnings += [f"designed model: {n}" for n in d.notes]
    c = d.counts
    return {
        "name": None,
        "shape_rule": d.rule,
        "shape_rule_source": getattr(chosen, "source", None) or _rule_source(d.rule),
        "model": d.model_dict(),
        "total": c.total,
        "non_embedding": c.non_embedding,
        "active": c.active,
        "flops_per_token": c.flops_per_token,
        "seq_len": d.model.seq_len,
        "k": {"6ND_total": 6.0 * c.total, "6ND_nonembed": 6.0 * c.non_embedding, "trainer_flops": c.flops_per_token},
    }


def _rule_source(name: str) -> str:
    from models.design import RULES  # deferred: imports numpy/pydantic (a fast scalelab --help)

    return RULES[name].source


def choose_run(
    ch, law, C, conv, n_opt, vocab, seq_len, ci, warnings, unique=None, *, presets_only=False, shape_rule=None
) -> dict | None:
    """The run to train at C. Default: the model designed at N_opt (`designed_candidate`), its tokens
    what C buys in the fit's convention. `presets_only`: the dense configs/models/ preset with the
    lowest predicted loss (approach 3; a data-constrained law counts the repetition of the fits'
    data), else nearest N_opt; an MoE preset never (a dense law ranks it by the wrong N and its
    tokens would not spend C)."""

    from scaling.planning.run_model import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        PRESET_KEY,
        model_presets,
    )

    extra = {"U": unique} if unique and data_constrained(ch) else {}
    if presets_only:
        candidates = [p for p in model_presets(vocab, seq_len) if not p["moe"]]
        if not candidates:
            return None
    else:
        candidates = [designed_candidate(ch, n_opt, conv, vocab, seq_len, shape_rule, warnings)]
    key = PRESET_KEY.get(conv["n_kind"], "total")
    for p in candidates:
        p["N"] = p[key]
        p["tokens"] = C / p["k"][conv["compute"]]
    if ch.get("approach") == 3:
        for p in candidates:
            p["predicted_loss"] = float(law.predict(p["N"], p["tokens"], **extra))
    if not presets_only:
        best, rule = candidates[0], "designed at N_opt"
    elif ch.get("approach") == 3:
        best = min(candidates, key=lambda p: p["predicted_loss"])
        rule = "lowest predicted loss at this compute (presets only)"
    else:
        best = min(candidates, key=lambda p: abs(np.log(p["N"]) - np.log(n_opt)))
        rule = "nearest N_opt (log scale; presets only)"
    run = {
        "preset": best["name"],
        "shape_rule": best.get("shape_rule"),
        "choice": rule,
        "n_kind": key,
        "N": best["N"],
        "params": best["total"],
        "non_embedding_params": best["non_embedding"],
        "flops_per_token": best["flops_per_token"],
        "seq_len": best["seq_len"],
        "tokens": best["tokens"],
        "ratio_to_N_opt": best["N"] / n_opt,
        "compute": {k: v * best["tokens"] for k, v in best["k"].items()},
        "model": best["model"],
    }
    if best.get("shape_rule_source"):
        run["shape_rule_source"] = best["shape_rule_source"]
    if ch.get("approach") == 3:
        pred = predict_loss(ch, best["N"], best["tokens"], ci, **extra)
        run.update(
            {"loss": pred["loss"], "loss_interval": pred["interval"], "loss_interval_kind": pred["interval_kind"]}
        )
        if "parameter_interval" in pred:
            run["loss_parameter_interval"] = pred["parameter_interval"]
        if presets_only:
            ranked = sorted(candidates, key=lambda p: p["predicted_loss"])
            run["runners_up"] = [
                {"preset": p["name"], "N": p["N"], "tokens": p["tokens"], "predicted_loss": p["predicted_loss"]}
                for p in ranked[1:3]
            ]
    if presets_only and not 0.5 <= run["ratio_to_N_opt"] <= 2.0:
        warnings.append(
            f"the chosen preset {best['name']} has {best['N']:.3g} "
            f"{key} parameters, {run['ratio_to_N_opt']:.2g}x N_opt: "
            "no preset close to the optimum (drop --presets-only to design the model at N_opt)"
        )
    rng = ch.get("data_range") or {}
    if rng.get("N") and not (rng["N"][0] / 2 <= best["N"] <= rng["N"][1] * 10):
        warnings.append(
            f"the planned model's N = {best['N']:.3g} is far outside "
            f"the fitted sizes {rng['N'][0]:.3g}-{rng['N'][1]:.3g}"
        )
    return run
