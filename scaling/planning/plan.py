"""`plan`: combine fit records into a recommendation for a compute budget C.

Answers, in the Chinchilla record's conventions (compute kind and N kind, stated in the output):
- the continuous optimum N_opt, D_opt (approach 3 also predicts its loss);
- the run to train: the configs/models/ preset with the lowest predicted loss at C (approach 3;
  nearest N_opt in log space for approaches 1-2), its tokens D = C / k(preset) in the same
  convention, its predicted loss with a prediction interval, and its learning rate and batch
  from a batch-lr fit (evaluated at that run's own N, D and C in the batch-lr fit's convention);
- every warning of the fits used, and the plan's own (extrapolation, data repetition, a batch-lr
  law used outside the range it was fitted on).
`scaling.planning.emit.to_train_config` turns the plan into that run's train config, carrying the
fits' training recipe (schedule, warmup, weight decay, sequence length, data), so the run is trained
like the runs the law saw; `emit_config` writes it.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from scaling.core.bootstrap import interval
from scaling.core.conventions import TokenCost, conventions_of
from scaling.core.diagnostics import EXTRAPOLATION_WARN_FACTOR
from scaling.core.errors import InputError
from scaling.fits.record import FitRecord, _clean, has_exponents
from scaling.laws.allocation import allocate, optimal, search_range
from scaling.laws.hparams import ComputeHParamLaw, NDHParamLaw
from scaling.laws.loss import ChinchillaLaw, DataConstrainedLaw, FrontierLaw
from scaling.laws.prediction import data_constrained, predict_loss
from scaling.laws.registry import from_record
from scaling.planning.record import PlanRecord
from scaling.planning.verdict import IDENTIFIED_SPAN, make_verdict

EPOCHS_WARN = 4.0


def _samples(rec: FitRecord, keys) -> dict | None:
    s = (rec.get("bootstrap") or {}).get("samples") or {}
    if all(k in s for k in keys):
        n = min(len(s[k]) for k in keys)
        return {k: np.asarray([np.nan if v is None else v for v in s[k][:n]], dtype=float) for k in keys}
    return None


def _fit_warnings(fits: list[FitRecord]) -> list[str]:
    out = []
    for f in fits:
        name = f["law"] + (f" approach {f['approach']}" if f.get("approach") else "")
        out += [f"{name} fit: {w}" for w in f.get("warnings") or []]
    return out


def make_plan(
    fits: list[FitRecord],
    compute: float,
    *,
    vocab_size: int | None = None,
    ci: float = 0.95,
    compute_kind: str | None = None,
    unique_tokens: float | None = None,
    presets_only: bool = False,
    shape_rule: str | None = None,
    identified_span: float = IDENTIFIED_SPAN,
) -> PlanRecord:
    """Recommendation for compute C (in the Chinchilla record's convention) from the given fits.
    A data-constrained law allocates C for `unique_tokens` unique training tokens (default: the
    fitted runs' data set, when they share one): few unique tokens shrink N_opt.
    Several chinchilla records of different approaches: the approach-3 one plans, the others are
    compared with it on the compute-optimal exponent (the plan's `verdict`, scaling.planning.verdict)."""
    from scaling.planning.run_model import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        default_vocab_size,
        recipe_vocab,
    )

    if not (compute > 0 and np.isfinite(compute)):
        raise InputError(f"--compute must be a positive number of FLOPs (got {compute})")
    alloc = [f for f in fits if f["law"] == "chinchilla"]
    if not alloc:
        raise InputError(
            "plan needs a chinchilla fit record (--fit F.json from `scalelab fit chinchilla`) for N_opt and D_opt"
        )
    alloc, cross = _planning_record(alloc)
    ch = alloc[0]
    hp = [f for f in fits if f["law"] == "batch-lr"]
    cb = [f for f in fits if f["law"] == "critical-batch"]
    warnings: list[str] = _fit_warnings(fits)
    conv = conventions_of(ch, warnings)
    if compute_kind and compute_kind != conv["compute"]:
        raise InputError(
            f"--compute-kind {compute_kind} differs from the chinchilla fit's convention ({conv['compute']}): "
            f"give the budget in {conv['compute']} FLOPs (or refit with --compute-kind {compute_kind})"
        )
    C = float(compute)
    out: dict = {
        "compute": C,
        "ci": ci,
        "conventions": {"compute": conv["compute"], "n_kind": conv["n_kind"]},
        "fits": [{"law": f["law"], "approach": f.get("approach"), "data_sha256": f.get("data_sha256")} for f in fits],
    }
    law = from_record(ch)
    cost = TokenCost.from_record(ch) if ch.get("conventions") else TokenCost(conv["compute"], conv["n_kind"])
    rng = ch.get("data_range") or {}
    n_range = search_range(np.asarray(rng.get("N") or [1.0, 1.0]))
    if unique_tokens is not None and not (unique_tokens > 0 and np.isfinite(unique_tokens)):
        raise InputError(f"--unique-tokens must be a positive number of tokens (got {unique_tokens})")
    if unique_tokens is not None and not data_constrained(ch):
        warnings.append(
            "--unique-tokens is used by a data-constrained law only (fit --law data-constrained): "
            "this chinchilla law assumes unlimited unique data"
        )
    unique = (unique_tokens or (ch.get("data") or {}).get("unique_tokens")) if data_constrained(ch) else None
    if ch.get("approach") == 3 and unique:
        n_opt, d_opt = (float(v) for v in allocate(partial(law.predict, U=unique), C, cost, n_range))
        n_fresh, d_fresh = (float(v) for v in optimal(law, C, cost, n_range))
        out["loss_at_optimum"] = float(law.predict(n_opt, d_opt, U=unique))
        out["data_constrained"] = {
            "unique_tokens": float(unique),
            "source": "--unique-tokens" if unique_tokens else "the fitted runs' data set",
            "epochs": d_opt / unique,
            "N_opt_fresh": n_fresh,
            "D_opt_fresh": d_fresh,
            "loss_at_optimum_fresh": float(law.predict(n_fresh, d_fresh)),
        }
    elif ch.get("approach") == 3:
        n_opt, d_opt = (float(v) for v in optimal(law, C, cost, n_range))
        out["loss_at_optimum"] = float(law.predict(n_opt, d_opt))
        if data_constrained(ch):
            warnings.append(
                "data-constrained law without unique tokens (the fitted runs do not share one data set): "
                "N_opt assumes unlimited unique data; give --unique-tokens"
            )
    else:
        n_opt, d_opt = (float(v) for v in law.compute_optimal(C))
        warnings.append(f"approach {ch.get('approach')} fit: no loss prediction (only approach 3 predicts loss)")
    out["N_opt"], out["D_opt"] = n_opt, d_opt
    out["n_kind"] = conv["n_kind"]
    no_optimum = _frontier_intervals(out, ch, C, cost, n_range, ci, warnings, unique)
    if rng.get("C"):
        factor = C / rng["C"][1]
        out["extrapolation_factor"] = factor
        if factor > EXTRAPOLATION_WARN_FACTOR:
            warnings.append(
                f"compute {C:.3g} is {factor:.3g}x the largest fitted run ({rng['C'][1]:.3g} "
                "FLOPs): a far extrapolation, intervals understate the risk"
            )
        elif C < rng["C"][0]:
            warnings.append(f"compute {C:.3g} is below the smallest fitted run ({rng['C'][0]:.3g} FLOPs)")
    recipe = ch.get("recipe") or {}
    if recipe:
        out["recipe"] = {"settings": recipe.get("settings"), "data": recipe.get("data")}
    seq_len = (recipe.get("settings") or {}).get("model.seq_len")
    vocab = vocab_size or recipe_vocab(recipe) or default_vocab_size()
    out["vocab_size"] = vocab
    unique = unique or (ch.get("data") or {}).get("unique_tokens")
    run = (
        _choose_run(
            ch,
            law,
            C,
            conv,
            n_opt,
            vocab,
            seq_len,
            ci,
            warnings,
            unique,
            presets_only=presets_only,
            shape_rule=shape_rule,
        )
        if vocab
        else None
    )
    if run:
        out["run"] = run
        if unique:
            run["epochs"] = run["tokens"] / unique
            if run["epochs"] > EPOCHS_WARN:
                warnings.append(
                    f"the planned run would see its {unique:.3g} unique training tokens {run['epochs']:.3g} times "
                    f"(> {EPOCHS_WARN:g} epochs): repeated data makes the loss "
                    "law optimistic; use more data or fit --law data-constrained"
                )
    if hp:
        _hparams(out, hp[-1], C, n_opt, d_opt, ci, warnings)
    else:
        warnings.append(
            "no batch-lr fit given: no learning-rate / batch-size "
            "recommendation (the emitted run keeps the fits' recipe)"
        )
    if cb:
        c, p = cb[-1], cb[-1]["params"]
        run = out.get("run") or {}
        if "bcrit_coef_D" in p and p.get("bcrit_exp_D") is not None:  # Zhang et al. 2024: B_crit follows the data
            out["B_crit_tokens"] = float(p["bcrit_coef_D"] * (run.get("tokens") or d_opt) ** p["bcrit_exp_D"])
            out["B_crit_from"] = "B_crit(D) at the run's tokens"
        elif "bcrit_coef" in p:
            out["B_crit_tokens"] = float(from_record(c).predict(n_opt))
            out["B_crit_from"] = "B_crit(N) at N_opt"
        if "B_crit_tokens" in out:
            bt = run.get("batch_tokens")
            if bt and bt > out["B_crit_tokens"]:
                warnings.append(
                    f"recommended batch {bt:.3g} tokens exceeds the critical batch "
                    f"{out['B_crit_tokens']:.3g}: diminishing returns per token"
                )
    out["warnings"] = warnings
    out["verdict"] = make_verdict(
        out, ch, cross, max_span=identified_span, edge_fraction=no_optimum, batch_lr=hp[-1] if hp else None
    )
    return PlanRecord(_clean(out))


def _planning_record(alloc: list) -> tuple[list, list]:
    """([the record to plan from], [the other approaches' records, compared on the exponent])."""
    if len(alloc) == 1:
        return alloc, []
    approaches = [f.get("approach") for f in alloc]
    if approaches.count(3) != 1 or len(set(approaches)) != len(approaches):
        raise InputError(
            "plan takes one chinchilla fit record, or one per approach with exactly one approach 3 (which plans; "
            f"the others cross-check its exponent); got approaches {approaches}"
        )
    main = next(f for f in alloc if f.get("approach") == 3)
    return [main], [f for f in alloc if f is not main]


def _frontier_intervals(out, ch, C, cost, n_range, ci, warnings, unique=None):
    if unique:  # a data-constrained law's draws, each allocating C for the same unique tokens
        keys = ("E", "A", "B", "alpha", "beta", "R_D_star") + (("R_N_star",) if "R_N_star" in ch["params"] else ())
        s = _samples(ch, keys)
        if s:
            with np.errstate(all="ignore"):
                law = DataConstrainedLaw(**{k: v[:, None] for k, v in s.items()})
                n_s, d_s = allocate(partial(law.predict, U=unique), C, cost, n_range)
    elif ch.get("approach") == 3:
        s = _samples(ch, ("E", "A", "B", "alpha", "beta"))
        if s:
            with np.errstate(all="ignore"):
                if cost.exact:
                    n_s, d_s = ChinchillaLaw(**s).compute_optimal(C)
                else:
                    n_s, d_s = allocate(
                        ChinchillaLaw(**{k: v[:, None] for k, v in s.items()}).predict, C, cost, n_range
                    )
    else:
        s = _samples(ch, ("N_coef", "a", "D_coef", "b"))
        if s:
            n_s, d_s = FrontierLaw(**s).compute_optimal(C)
    if s:
        out["N_opt_interval"] = interval(n_s, ci)
        out["D_opt_interval"] = interval(d_s, ci)
        if ch.get("approach") == 3:  # the loss at each draw's own optimum (the verdict's loss interval)
            flat = (DataConstrainedLaw if unique else ChinchillaLaw)(**s)
            with np.errstate(all="ignore"):
                ls = flat.predict(n_s, d_s, U=unique) if unique else flat.predict(n_s, d_s)
            out["loss_at_optimum_interval"] = interval(ls, ci)
        fitted = np.all([np.isfinite(v) for v in s.values()], axis=0)
        return float(np.mean(~np.isfinite(np.asarray(n_s)[fitted]))) if fitted.any() else None
    warnings.append("chinchilla fit has no bootstrap samples: no intervals for N_opt/D_opt (fit with --bootstrap N)")
    return None


def designed_candidate(ch, n_opt, conv, vocab, seq_len, rule, warnings) -> dict:
    """The model designed at N_opt (models.design) as a run candidate: in the family of the fit's
    runs (their recipe's model shapes) unless `rule` names one of models.design.RULES."""
    from models.design import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        DEFAULT_RULE,
        design,
        family_rule,
    )

    shapes = [m for m in (((ch.get("recipe") or {}).get("models")) or []) if not m.get("moe")]
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


def _choose_run(
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


def _hparams(out, h, C, n_opt, d_opt, ci, warnings):
    """lr and batch from the batch-lr law, at the planned run's own N, D and C in the law's convention."""
    if not has_exponents(h):
        warnings.append(
            f"batch-lr fit has no law ({(h.get('settings') or {}).get('exponents') or 'no exponents'}): "
            "no learning-rate / batch-size recommendation (the emitted run keeps the fits' recipe)"
        )
        return
    hl = from_record(h)
    form = h.get("settings", {}).get("form")
    hconv = conventions_of(h)
    run = out.get("run")
    if run:  # the run's own size and compute in the batch-lr fit's conventions (exact: the preset is known)
        N = run["non_embedding_params"] if hconv["n_kind"] == "non_embedding" else run["params"]
        D, Ch = run["tokens"], run["compute"].get(hconv["compute"], C)
    else:
        N, D, Ch = n_opt, d_opt, C
    if form == "nd":
        lr, bt = hl.predict(N=N, D=D)
        keys = ("lr_coef", "lr_exp_N", "lr_exp_D", "bs_coef", "bs_exp_D")
    else:
        lr, bt = hl.predict(C=Ch)
        keys = ("lr_coef", "lr_exp_C", "bs_coef", "bs_exp_C")
    p = h["params"]
    if any(p.get(k) is None for k in keys):
        warnings.append("batch-lr fit has non-identified exponents: lr/batch predictions are unreliable")
    target = run if run else out
    target["lr"], target["batch_tokens"] = float(lr), float(bt)
    s = _samples(h, keys)
    if s:
        with np.errstate(all="ignore"):
            lrs, bts = NDHParamLaw(**s).predict(N=N, D=D) if form == "nd" else ComputeHParamLaw(**s).predict(C=Ch)
        target["lr_interval"], target["batch_tokens_interval"] = interval(lrs, ci), interval(bts, ci)
    rng = h.get("data_range") or {}
    where = {"N": N, "D": D, "C": Ch}
    outside = [
        f"{k} = {where[k]:.3g} (fitted {rng[k][0]:.3g}-{rng[k][1]:.3g})"
        for k in ("N", "D", "C")
        if rng.get(k) and not rng[k][0] / 1.01 <= where[k] <= rng[k][1] * 1.01
    ]
    if outside:
        warnings.append("batch-lr law used outside the range it was fitted on: " + ", ".join(outside))


def budget(rec: FitRecord, multiplier: float) -> float:
    """`multiplier` x the largest IsoFLOP budget `rec` was fitted on (its largest compute when it has
    no anchors outside the budgets), in the record's own convention."""
    rng = (rec.get("data_range") or {}).get("C_budgets") or (rec.get("data_range") or {}).get("C")
    if not rng:
        raise InputError(f"{rec['law']} fit record has no data_range.C: cannot size a budget relative to its runs")
    return float(multiplier) * float(rng[1])
