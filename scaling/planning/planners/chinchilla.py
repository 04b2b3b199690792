"""The Chinchilla law plans the budget (the allocating planner): the compute-optimal N_opt and D_opt at C in the
record's conventions (approach 3 also predicts its loss; a data-constrained law allocates C for the unique
tokens), their bootstrap intervals, and the run to train (`choose_run`); its `finish` writes the plan's
verdict. Several records of different approaches: the approach-3 one plans, the others are compared with it on
the compute-optimal exponent (scaling.planning.verdict)."""

from __future__ import annotations

from functools import partial

import numpy as np

from scaling.core.bootstrap import interval
from scaling.core.conventions import TokenCost, conventions_of
from scaling.core.diagnostics import EXTRAPOLATION_WARN_FACTOR
from scaling.core.errors import InputError
from scaling.laws.allocation import allocate, optimal, search_range
from scaling.laws.loss import ChinchillaLaw, DataConstrainedLaw, FrontierLaw
from scaling.laws.prediction import data_constrained
from scaling.laws.registry import from_record
from scaling.planning.planner import PlanDraft, Planner, register_planner, samples
from scaling.planning.run_choice import EPOCHS_WARN, choose_run
from scaling.planning.verdict import make_verdict


def plan_allocation(draft: PlanDraft, records: list) -> None:
    """N_opt, D_opt, their intervals and the run, for draft.compute in the planning record's convention."""
    from scaling.planning.run_model import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        default_vocab_size,
        recipe_vocab,
    )

    alloc, cross = planning_record(records)
    ch = alloc[0]
    warnings = draft.warnings
    conv = conventions_of(ch, warnings)
    if draft.compute_kind and draft.compute_kind != conv["compute"]:
        raise InputError(
            f"--compute-kind {draft.compute_kind} differs from the chinchilla fit's convention ({conv['compute']}): "
            f"give the budget in {conv['compute']} FLOPs (or refit with --compute-kind {draft.compute_kind})"
        )
    C, ci, unique_tokens = draft.compute, draft.ci, draft.unique_tokens
    out = draft.out
    out.update(
        {
            "compute": C,
            "ci": ci,
            "conventions": {"compute": conv["compute"], "n_kind": conv["n_kind"]},
            "fits": [
                {"law": f["law"], "approach": f.get("approach"), "data_sha256": f.get("data_sha256")}
                for f in draft.fits
            ],
        }
    )
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
    n_opt, d_opt = _optimum(out, ch, law, C, cost, n_range, unique, unique_tokens, warnings)
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
    vocab = draft.vocab_size or recipe_vocab(recipe) or default_vocab_size()
    out["vocab_size"] = vocab
    unique = unique or (ch.get("data") or {}).get("unique_tokens")
    run = (
        choose_run(
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
            presets_only=draft.presets_only,
            shape_rule=draft.shape_rule,
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
    draft.state.update(chinchilla=ch, cross=cross, no_optimum=no_optimum)


def _optimum(out, ch, law, C, cost, n_range, unique, unique_tokens, warnings) -> tuple[float, float]:
    """(N_opt, D_opt) at C: approach 3 minimises its loss law (for the unique tokens, when data-constrained)
    and writes the loss there; approaches 1-2 read their fitted frontier."""
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
    return n_opt, d_opt


def finish_with_verdict(draft: PlanDraft) -> None:
    """The verdict (scaling.planning.verdict) on the finished plan, its warnings included; with the batch-lr
    record the plan took lr and batch from, when one was given (`draft.state["batch_lr"]`)."""
    s = draft.state
    draft.out["verdict"] = make_verdict(
        draft.out,
        s["chinchilla"],
        s["cross"],
        max_span=draft.identified_span,
        edge_fraction=s["no_optimum"],
        batch_lr=s.get("batch_lr"),
    )


def planning_record(alloc: list) -> tuple[list, list]:
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
        s = samples(ch, keys)
        if s:
            with np.errstate(all="ignore"):
                law = DataConstrainedLaw(**{k: v[:, None] for k, v in s.items()})
                n_s, d_s = allocate(partial(law.predict, U=unique), C, cost, n_range)
    elif ch.get("approach") == 3:
        s = samples(ch, ("E", "A", "B", "alpha", "beta"))
        if s:
            with np.errstate(all="ignore"):
                if cost.exact:
                    n_s, d_s = ChinchillaLaw(**s).compute_optimal(C)
                else:
                    n_s, d_s = allocate(
                        ChinchillaLaw(**{k: v[:, None] for k, v in s.items()}).predict, C, cost, n_range
                    )
    else:
        s = samples(ch, ("N_coef", "a", "D_coef", "b"))
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


def lead_record(alloc: list):
    """The record that plans: the approach-3 one when there is one (approaches 1-2 beside it cross-check it)."""
    return next((f for f in alloc if f.get("approach") == 3), None) or alloc[0]


PLANNER = register_planner(
    Planner(law="chinchilla", apply=plan_allocation, allocates=True, finish=finish_with_verdict, lead=lead_record)
)
