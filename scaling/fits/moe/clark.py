"""`fit moe --law clark`: Clark et al.'s log10 L(N, E) fitted, bootstrapped and read out.

The body of the record (params, intervals, objective, diagnostics, derived, settings, bootstrap)
for `scaling.fits.moe.fit.fit_moe`. Parameters the design cannot identify are held at 0 and null.
"""

from __future__ import annotations

import numpy as np

from scaling.core import bootstrap as bs
from scaling.core.diagnostics import huber_diagnostics
from scaling.core.errors import FitError, InputError
from scaling.core.selection import distinct
from scaling.fits import pipeline
from scaling.fits.moe import objectives as mo
from scaling.fits.moe.design import interval_warnings
from scaling.fits.moe.optimum import candidates, clark_at, clark_best
from scaling.laws.moe import law_from_params


def fit_clark_body(df, warnings, *, bootstrap, seed, delta, ci) -> dict:
    N, E, L = (df[c].to_numpy(float) for c in ("N", "E", "loss"))
    if distinct(N) < 2:
        raise InputError("moe --law clark: every run has the same N; the law needs 2 or more sizes")
    free = mo.clark_free(N, E)
    if "b" not in free:
        warnings.append(
            f"not identified: every run has E = {E[0]:g}: b and c (the expert terms) cannot be estimated; "
            "fitted as log L = a log N + d (b, c null); add runs with another expert count (dense runs are E = 1)"
        )
    elif "c" not in free:
        warnings.append(
            "not identified: N varies at only one expert count, so c "
            "(the N x E interaction) cannot be estimated (null, read as 0)"
        )
    res = mo.fit_clark(N, E, L, free, delta=delta)
    params = mo.clark_params(res.x, free)
    obj = mo.ClarkObjective(N, E, L, free, delta)
    resid = obj.residuals(res.x)
    diagnostics = huber_diagnostics(res, free, resid, delta)
    diagnostics["residuals_log"] = [float(r) for r in resid]
    intervals, boot = {}, None
    if bootstrap:

        def one(idx):
            if mo.clark_free(N[idx], E[idx]) != free or distinct(N[idx]) < 2:
                raise FitError("the resample does not identify the same parameters")
            r = mo.fit_clark(N[idx], E[idx], L[idx], free, delta=delta, extra_starts=[res.x])
            return {k: v for k, v in mo.clark_params(r.x, free).items() if v is not None}

        b = pipeline.bootstrap(one, bs.resample_indices(len(N), bootstrap, seed), seed=seed, ci=ci)
        intervals = b.intervals()
        boot = b.record(
            method="resample runs with replacement; each resample refits the summed Huber; percentile intervals"
        )
        if b.failed:
            warnings.append(f"{b.failed} of {bootstrap} bootstrap resamples failed to fit ({b.failure_text()})")
        interval_warnings(intervals, ("b", "c"), warnings, ratio=False)
    law = law_from_params("clark", params)
    derived = {"cutoff_N": law.cutoff_N, "rows": _clark_derived(law, N, E)}
    settings = {
        "form": "log10 L = a log10 N + b log10 E + c log10 N log10 E + d "
        "(Clark et al. 2022, Eq. 1; E as given, no E-hat transform)",
        "log_base": 10,
        "objective_definition": "sum of Huber(delta) on natural-log loss residuals (convex: linear in the parameters)",
        "free_parameters": list(free),
    }
    return {
        "params": params,
        "intervals": intervals,
        "objective": float(res.fun),
        "diagnostics": diagnostics,
        "derived": derived,
        "settings": settings,
        **({"bootstrap": boot} if boot else {}),
    }


def _clark_derived(law, N, E) -> list[dict]:
    """At each decade of N in the data: the best expert count in the data's range, its loss, the
    dense loss and Clark's effective parameter count."""
    grid_E, _ = candidates(E, integer=True)
    lo, hi = int(np.floor(np.log10(N.min()))), int(np.ceil(np.log10(N.max())))
    rows = []
    for n in [float(10.0**k) for k in range(lo, hi + 1)]:
        best, dense = clark_best(law, n, grid_E), clark_at(law, n, 1.0)
        rows.append(
            {
                "N": n,
                "E": best["E"],
                "loss": best["loss"],
                "dense_loss": float(dense["loss"]),
                "gain": float(dense["loss"]) - best["loss"],
                "effective_params": best["effective_params"],
                "compute_multiplier": best["effective_params"] / n,
            }
        )
    return rows
