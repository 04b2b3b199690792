"""Approaches 1 and 2 (Hoffmann et al. 2022): the compute-optimal frontier N_opt(C), D_opt(C) fitted directly,
from the lowest loss per log-compute bin (approach 1) or a parabola in log N per IsoFLOP budget (approach 2,
OLS or inverse-variance weighted), with its bootstrap and the derived optima; `fit_frontier` is the record body
`fit_chinchilla` takes for them."""

from __future__ import annotations

import numpy as np

from scaling.core import bootstrap as bs
from scaling.core.diagnostics import compute_grid
from scaling.core.errors import FitError
from scaling.core.selection import group_by_tolerance
from scaling.fits import pipeline
from scaling.fits.chinchilla.isoflop import MIN_SIZES, approach1, approach2, approach2_resample, note_text
from scaling.fits.chinchilla.resampling import identification, resample_runs
from scaling.fits.record import WEIGHTS_TEXT
from scaling.laws.loss import FrontierLaw


def fit_frontier(
    df, C, warnings, *, approach, bootstrap, seed, ci, budget_tol, n_bins, at_compute, curves, weights="ols"
) -> dict:
    """The record body (params, intervals, diagnostics, derived, settings, bootstrap) of approach 1 or 2."""
    N, D, L = (df[c].to_numpy(float) for c in ("N", "D", "loss"))
    weighted = weights == "inverse-variance"
    alternative = None
    if approach == 2:
        params, rows, groups, settings, diagnostics, alternative = _approach2_fit(
            df, N, D, L, C, budget_tol, weights, warnings
        )
    else:
        params, rows = approach1(N, D, L, C, n_bins=n_bins)
        settings = {"n_bins": n_bins, "method": "lowest loss per log-compute bin; OLS of log N, log D on log C"}
        if params is None:
            raise FitError("approach 1 found fewer than 2 envelope points with different N")
        diagnostics = {"envelope": rows, "n_envelope_points": len(rows)}
        if not curves:
            warnings.append(
                "approach 1 on one final loss per run: the envelope is coarse; Approach 2 or 3 is more reliable here"
            )
    if len(rows) < 3:
        warnings.append(f"only {len(rows)} frontier points: a and b are barely constrained")
    objective = None
    intervals = {}
    boot = None
    if bootstrap:
        if approach == 2:
            idxs = bs.resample_indices(len(N), bootstrap, seed, groups=groups)

            def one(idx):
                return approach2_resample(N[idx], D[idx], L[idx], C[idx], groups[idx], weighted=weighted)

            method = "resample runs with replacement within each budget; percentile intervals"
        else:
            idxs, method = resample_runs(df, len(N), bootstrap, seed, curves)
            settings["resample"] = method
            one = lambda idx: approach1(N[idx], D[idx], L[idx], C[idx], n_bins=n_bins)[0]  # noqa: E731
        b = pipeline.bootstrap(one, idxs, seed=seed, ci=ci)
        keys = ("a", "b", "N_coef", "D_coef")
        intervals = b.intervals(keys)
        boot = b.record(keys=keys, method=method)
        if b.failed:
            warnings.append(f"{b.failed} of {bootstrap} bootstrap resamples gave no frontier fit: {b.failure_text()}")
        identification(intervals, warnings, keys=("a", "b"))
        if alternative:
            warnings.extend(w for w in [_weights_warning(params, intervals, alternative, weights, ci)] if w)

    law = FrontierLaw(N_coef=params["N_coef"], a=params["a"], D_coef=params["D_coef"], b=params["b"])
    derived = []
    for c in sorted(set(compute_grid(C) + list(at_compute or []))):
        n, d = law.compute_optimal(c)
        derived.append({"C": c, "N_opt": float(n), "D_opt": float(d), "extrapolation_factor": c / float(C.max())})
    diagnostics.update({"r2_N": params.pop("r2_N"), "r2_D": params.pop("r2_D")})
    return pipeline.fit_fields(params, intervals, objective, diagnostics, derived, settings, boot)


def _approach2_fit(df, N, D, L, C, budget_tol: float, weights: str, warnings: list[str]):
    """Approach 2 on the full data: a parabola per IsoFLOP budget, the frontier through their minima, the fit
    with the other weighting beside it, and the warnings on budgets that constrain little.
    Returns (params, rows, groups, settings, diagnostics, alternative)."""
    weighted = weights == "inverse-variance"
    alternative = None
    groups = _budget_groups(df, C, budget_tol)
    params, rows, notes, groups = approach2(N, D, L, C, groups=groups, weighted=weighted)
    settings = {
        "budget_tol": budget_tol,
        "frontier_weights": weights,
        "method": "parabola in log N per IsoFLOP budget; D_opt = C / k(N_opt); " + WEIGHTS_TEXT[weights],
    }
    other = "ols" if weighted else "inverse-variance"
    alt, *_ = approach2(N, D, L, C, groups=groups, weighted=not weighted)
    # an inverse-variance fit needs residual degrees of freedom
    if alt is not None and (weighted or alt["weighted"]):
        alternative = {"frontier_weights": other, "a": alt["a"], "b": alt["b"]}
    if notes:
        warnings.append(
            f"{len(notes)} of {int(np.unique(groups).size)} compute budgets gave no usable parabola minimum: "
            + "; ".join(map(note_text, notes))
        )
    few = [r for r in rows if r["n_sizes"] < MIN_SIZES]
    if few:
        warnings.append(
            f"{len(few)} budget(s) have fewer than {MIN_SIZES} model sizes ("
            + ", ".join(f"C~{r['C']:.3g}: {r['n_sizes']}" for r in few)
            + "): their parabola is barely constrained"
        )
    edge = [r for r in rows if r["edge"]]
    if edge:
        warnings.append(
            f"{len(edge)} budget(s) have their best run at the smallest or largest size ("
            + ", ".join(f"C~{r['C']:.3g}: N={r['best_run_N']:.3g}" for r in edge)
            + "): the true minimum may lie outside the sweep"
        )
    if params is None:
        raise FitError(
            "approach 2 needs at least 2 IsoFLOP budgets with an interior loss minimum; found "
            f"{len(rows)} (budgets are grouped within {budget_tol:.0%} compute; see --budget-tol)"
        )
    if not params.pop("weighted") and weighted:
        warnings.append(
            "approach 2 regression is unweighted: no residual degrees "
            "of freedom to weight budgets by (3 sizes per budget)"
        )
    for r in rows:
        r.pop("_var_unit", None)
    diagnostics = {
        "budgets": rows,
        "n_budgets": len(rows),
        "n_groups": int(np.unique(groups).size),
        "skipped_budgets": [note_text(n) for n in notes],
    }
    if alternative:
        diagnostics["frontier_alternative"] = alternative
    return params, rows, groups, settings, diagnostics, alternative


def _weights_warning(params: dict, intervals: dict, alt: dict, weights: str, ci: float) -> str | None:
    """Approach 2 with --bootstrap: when the other weighting's exponent a lies outside this fit's
    interval, the two procedures disagree by more than the data's uncertainty; say both."""
    iv = intervals.get("a")
    if not iv or iv[0] <= alt["a"] <= iv[1]:
        return None
    name = {"ols": "OLS", "inverse-variance": "inverse-variance weighted"}
    return (
        f"approach 2 frontier: the {name[weights]} exponent a = {params['a']:.4g} [{iv[0]:.4g}, {iv[1]:.4g}] "
        f"({ci:.0%}) and the {name[alt['frontier_weights']]} a = {alt['a']:.4g} differ by more than that interval "
        f"(b = {params['b']:.4g} vs {alt['b']:.4g}); --frontier-weights {alt['frontier_weights']} gives the other"
    )


def _budget_groups(df, C, budget_tol):
    """IsoFLOP budgets: the sweep's own budget labels when every run has one, else compute clusters."""
    if "budget" in df.columns:
        b = df["budget"].to_numpy(float)
        if np.all(np.isfinite(b)):
            _, labels = np.unique(b, return_inverse=True)
            return labels.ravel()
    return group_by_tolerance(C, budget_tol)
