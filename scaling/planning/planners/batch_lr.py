"""The batch/LR law's part of the plan: the learning rate and batch of the planned run, evaluated at that run's
own N, D and C in the batch-lr fit's conventions (at N_opt, D_opt and C when no run was chosen), with their
bootstrap intervals, and a warning when the law is used outside the range it was fitted on."""

from __future__ import annotations

from typing import cast

import numpy as np

from scaling.core.bootstrap import interval
from scaling.core.conventions import conventions_of
from scaling.fits.record import has_exponents
from scaling.laws.hparams import ComputeHParamLaw, NDHParamLaw
from scaling.laws.registry import from_record
from scaling.planning.planner import PlanDraft, Planner, register_planner, samples


def plan_hparams(draft: PlanDraft, records: list) -> None:
    """lr and batch from the last batch-lr record given (kept for the verdict's batch-lr part)."""
    h = records[-1]
    draft.state["batch_lr"] = h
    out, C, ci, warnings = draft.out, draft.compute, draft.ci, draft.warnings
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
        N, D, Ch = out["N_opt"], out["D_opt"], C
    if form == "nd":
        lr, bt = cast(NDHParamLaw, hl).predict(N=N, D=D)
        keys: tuple[str, ...] = ("lr_coef", "lr_exp_N", "lr_exp_D", "bs_coef", "bs_exp_D")
    else:
        lr, bt = cast(ComputeHParamLaw, hl).predict(C=Ch)
        keys = ("lr_coef", "lr_exp_C", "bs_coef", "bs_exp_C")
    p = h["params"]
    if any(p.get(k) is None for k in keys):
        warnings.append("batch-lr fit has non-identified exponents: lr/batch predictions are unreliable")
    target = run if run else out
    target["lr"], target["batch_tokens"] = float(lr), float(bt)
    s = samples(h, keys)
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


PLANNER = register_planner(
    Planner(
        law="batch-lr",
        apply=plan_hparams,
        missing="no batch-lr fit given: no learning-rate / batch-size "
        "recommendation (the emitted run keeps the fits' recipe)",
    )
)
