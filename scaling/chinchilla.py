"""`fit_chinchilla`: Approaches 1, 2 and 3 on a table or run directory, returning a FitRecord.

Approach 3 (default) is the parametric L(N, D) fit of `scaling.chinchilla_fit`; Approaches 1 and 2
are the non-parametric frontier fits of `scaling.isoflop`. All share input validation, optional
dropping of the K highest-loss points, bootstrap intervals (resampling runs) and holdout validation.
"""
from __future__ import annotations

import time

import numpy as np

from scaling import bootstrap as bs
from scaling import inputs
from scaling.common import EXTRAPOLATION_WARN_FACTOR, compute_C, drop_highest, holdout_split, identification_warnings
from scaling.errors import FitError, InputError
from scaling.threads import blas_single_thread
from scaling.record import FitRecord, _clean, data_sha256, make_record

CORE = ("E", "A", "B", "alpha", "beta")


def _compute_grid(C: np.ndarray) -> list[float]:
    lo, hi = int(np.ceil(np.log10(C.min()))), int(np.ceil(np.log10(C.max()))) + 2
    return [float(10.0**k) for k in range(lo, hi + 1)]


@blas_single_thread
def fit_chinchilla(
    data,
    *,
    approach: int = 3,
    drop_highest_k: int = 0,
    bootstrap: int = 0,
    holdout: str | None = None,
    holdout_fraction: float = 0.1,
    seed: int = 0,
    columns: dict[str, str] | None = None,
    n_kind: str = "total",
    grid: str = "fast",
    top_k: int = 32,
    bootstrap_top_k: int = 2,
    delta: float = 1e-3,
    ci: float = 0.95,
    budget_tol: float = 0.15,
    n_bins: int = 20,
    compute: list[float] | None = None,
    objective: str = "huber",
    law: str = "chinchilla",
) -> FitRecord:
    """Fit the Chinchilla law (approach 3) or frontier (approaches 1, 2) to `data`.

    data: DataFrame / CSV / Parquet path / run-directory tree with N, D (or flops), loss.
    grid: 'fast' (vectorised grid ranking, L-BFGS-B from the best `top_k`) or 'full' (all 4500).
    holdout: None or 'largest' (fit on the smaller runs, report relative error on the largest).
    objective (approach 3): 'huber' (summed Huber, default) or 'mle' (Huber-density likelihood, free sigma).
    law (approach 3): 'chinchilla' or 'data-constrained' (Muennighoff et al. 2023; needs column U).
    """
    if approach not in (1, 2, 3):
        raise InputError(f"--approach must be 1, 2 or 3 (got {approach})")
    if objective not in ("huber", "mle"):
        raise InputError(f"--objective must be 'huber' or 'mle' (got {objective!r})")
    if law not in ("chinchilla", "data-constrained"):
        raise InputError(f"--law must be 'chinchilla' or 'data-constrained' (got {law!r})")
    if approach != 3 and (objective != "huber" or law != "chinchilla"):
        opt = f"--objective {objective}" if objective != "huber" else f"--law {law}"
        raise InputError(f"{opt} applies to approach 3 only (got --approach {approach})")
    if holdout not in (None, "largest"):
        raise InputError(f"--holdout must be 'largest' (got {holdout!r})")
    if grid not in ("fast", "full"):
        raise InputError(f"grid must be 'fast' or 'full' (got {grid!r})")
    if bootstrap < 0:
        raise InputError(f"--bootstrap must be >= 0 (got {bootstrap})")
    ds = data if isinstance(data, inputs.Dataset) else inputs.load(data, columns, n_kind)
    min_pts = {1: 3, 2: 6, 3: 6}[approach]
    roles = ("N", "D", "loss", "U") if law == "data-constrained" else ("N", "D", "loss")
    min_pts += law == "data-constrained"
    inputs.validate(ds, roles, min_points=min_pts, law="chinchilla --law data-constrained" if law == "data-constrained" else f"chinchilla approach {approach}")
    df = drop_highest(ds.df, drop_highest_k)
    if len(df) < min_pts:
        raise InputError(f"chinchilla approach {approach}: too few points after --drop-highest: {len(df)} (need {min_pts})")
    warnings = list(ds.warnings)
    held = None
    if holdout == "largest":
        df, held = holdout_split(df, holdout_fraction, key="N")
        if len(df) < min_pts:
            raise InputError(f"--holdout largest leaves {len(df)} points to fit (need {min_pts})")
    C = compute_C(df)
    t0 = time.perf_counter()
    settings = {
        "approach": approach, "drop_highest": drop_highest_k, "bootstrap": bootstrap, "seed": seed, "ci": ci,
        "holdout": holdout, "holdout_fraction": holdout_fraction if holdout else None,
    }
    if law == "data-constrained":
        from scaling.data_constrained import fit_data_constrained

        body = fit_data_constrained(df, C, warnings, settings, objective=objective, grid=grid, top_k=top_k, bootstrap=bootstrap, boot_top_k=bootstrap_top_k, seed=seed, delta=delta, ci=ci, compute=compute)
    elif approach == 3:
        body = _approach3(df, C, warnings, settings, grid=grid, top_k=top_k, bootstrap=bootstrap, boot_top_k=bootstrap_top_k, seed=seed, delta=delta, ci=ci, compute=compute, objective=objective)
    else:
        body = _frontier(df, C, warnings, settings, approach=approach, bootstrap=bootstrap, seed=seed, ci=ci, budget_tol=budget_tol, n_bins=n_bins, compute=compute)
    body["diagnostics"]["fit_seconds"] = time.perf_counter() - t0
    rec = make_record(
        law="chinchilla",
        approach=approach,
        n_points=len(df),
        data_sha256=data_sha256(df, ["N", "D", "loss"] + (["U"] if law == "data-constrained" else [])),
        n_kind=ds.n_kind,
        source=ds.source,
        columns=ds.columns,
        settings=settings,
        data_range={"N": [float(df.N.min()), float(df.N.max())], "D": [float(df.D.min()), float(df.D.max())], "C": [float(C.min()), float(C.max())], "loss": [float(df.loss.min()), float(df.loss.max())]},
        warnings=warnings,
        **body,
    )
    if held is not None:
        rec["holdout"] = _clean(_holdout_report(rec, held))
    return rec


# ---------------------------------------------------------------- approach 3
def _approach3(df, C, warnings, settings, *, grid, top_k, bootstrap, boot_top_k, seed, delta, ci, compute, objective="huber"):
    from scaling.chinchilla_fit import BOUNDS, THETA, Objective, fit_theta, theta_to_params
    from scaling.laws import ChinchillaLaw

    N, D, L = (df[c].to_numpy(float) for c in ("N", "D", "loss"))
    warnings.extend(identification_warnings(N, D))
    if objective == "mle":  # Epoch's headline: likelihood of a Huber-shaped density with free sigma
        from scaling.chinchilla_mle import fit_theta_mle, sigma_warnings

        res, huber_res = fit_theta_mle(N, D, L, grid=grid, top_k=top_k, delta=delta)
        warnings.extend(sigma_warnings(res))
    else:
        res = fit_theta(N, D, L, grid=grid, top_k=top_k, delta=delta)
    params = theta_to_params(res.x)
    if objective == "mle":
        params["sigma"] = res.sigma
    for k, v in zip(THETA, res.x):
        lo, hi = BOUNDS[k]
        if min(v - lo, hi - v) <= 1e-6 * (1 + abs(v)):
            warnings.append(f"parameter {k} stopped on its bound ({v:.6g}; bounds [{lo}, {hi}]): the fit is not at an interior optimum")
    if not res.success:
        warnings.append(f"optimiser did not converge from the best start: {res.message}")
    settings.update({"delta": delta, "grid": grid, "top_k": None if grid == "full" else top_k, "objective": objective, "parametrisation": "LSE(a - alpha log N, b - beta log D, e)",
                     "objective_definition": "maximum likelihood: log p(r) = -Huber_delta(r/sigma) - log Z(delta) - log sigma, r = log-loss residual, sigma free; record objective = -log-likelihood"
                     if objective == "mle" else "sum of Huber(delta) on log residuals"})
    resid = Objective(N, D, L, delta).residuals(res.x)
    diagnostics = res.to_diagnostics()
    diagnostics.update({
        "theta": dict(zip(THETA, map(float, res.x))),
        "residual_log_rms": float(np.sqrt(np.mean(resid**2))),
        "residual_log_max_abs": float(np.max(np.abs(resid))),
        "frac_within_delta": float(np.mean(np.abs(resid) <= delta)),
    })
    if objective == "mle":
        diagnostics["huber_start_objective"] = float(huber_res.fun)
    law = ChinchillaLaw(**{k: params[k] for k in CORE})
    grid_C = compute or _compute_grid(C)
    intervals: dict = {}
    boot = None
    samples: dict = {}
    if bootstrap:
        idxs = bs.resample_indices(len(N), bootstrap, seed)
        # Starts per resample: the full-data optimum plus the full-data grid ranking's best
        # `boot_top_k` points (ranking once, not per resample; checked to reach the same
        # objective as 32 fresh starts on every tested Epoch resample).
        from scaling.chinchilla_fit import paper_grid

        g = paper_grid()
        boot_starts = g[np.argsort(Objective(N, D, L, delta).batch(g), kind="stable")[:boot_top_k]]

        def one(idx):
            r = fit_theta(N[idx], D[idx], L[idx], grid="full", starts=boot_starts, delta=delta, extra_starts=[res.x], polish=False)
            return theta_to_params(r.x)

        from scaling.chinchilla_mle import MLE_BOOTSTRAP_METHOD, refit_mle

        def one_mle(idx):  # each resample refits the MLE itself (sigma included), warm-started
            r = refit_mle(N[idx], D[idx], L[idx], [res.x, huber_res.x], delta=delta)
            return {**theta_to_params(r.x), "sigma": r.sigma}

        t = time.perf_counter()
        samples, failed = bs.run_bootstrap(one_mle if objective == "mle" else one, idxs)
        intervals = bs.percentile_intervals(samples, ci)
        boot = {"n": bootstrap, "failed": failed, "seed": seed, "ci": ci, "method": MLE_BOOTSTRAP_METHOD if objective == "mle" else "resample runs with replacement; percentile intervals",
                "starts_per_resample": "full-data MLE and summed-Huber optima" if objective == "mle" else f"full-data optimum + the {boot_top_k} best grid points on the full data", "seconds": time.perf_counter() - t,
                "standard_errors": bs.standard_errors(samples), "samples": {k: samples[k] for k in CORE}}
        if failed:
            warnings.append(f"{failed} of {bootstrap} bootstrap resamples failed to fit")
    derived = []
    cmax = float(C.max())
    for c in grid_C:
        n_opt, d_opt = law.compute_optimal(c)
        row = {"C": c, "N_opt": float(n_opt), "D_opt": float(d_opt), "loss_opt": float(law.predict(n_opt, d_opt)), "extrapolation_factor": c / cmax}
        if samples:
            s = {k: np.asarray(samples[k]) for k in CORE}
            with np.errstate(all="ignore"):
                laws_n, laws_d = ChinchillaLaw(**s).compute_optimal(c)
                laws_l = ChinchillaLaw(**s).predict(laws_n, laws_d)
            for key, arr in (("N_opt", laws_n), ("D_opt", laws_d), ("loss_opt", laws_l)):
                arr = arr[np.isfinite(arr)]
                if arr.size > 1:
                    row[key + "_interval"] = [float(np.percentile(arr, 100 * (1 - ci) / 2)), float(np.percentile(arr, 100 * (1 + ci) / 2))]
        derived.append(row)
    if grid_C and max(grid_C) > EXTRAPOLATION_WARN_FACTOR * cmax and compute:
        warnings.append(f"derived predictions extrapolate up to {max(grid_C) / cmax:.3g}x beyond the largest fitted compute ({cmax:.3g} FLOPs)")
    out = {"params": params, "intervals": intervals, "objective": res.fun, "diagnostics": diagnostics, "derived": derived}
    if boot:
        out["bootstrap"] = boot
    return out


# ---------------------------------------------------------------- approaches 1 and 2
def _frontier(df, C, warnings, settings, *, approach, bootstrap, seed, ci, budget_tol, n_bins, compute):
    from scaling.isoflop import approach1, approach2

    N, D, L = (df[c].to_numpy(float) for c in ("N", "D", "loss"))
    if approach == 2:
        params, rows, notes, groups = approach2(N, D, L, C, budget_tol=budget_tol)
        settings.update({"budget_tol": budget_tol, "method": "parabola in log N per IsoFLOP budget; OLS of log N_opt, log D_opt on log C"})
        if notes:
            warnings.append(f"{len(notes)} of {int(np.unique(groups).size)} compute groups gave no usable parabola minimum (see diagnostics.skipped_budgets)")
        if params is None:
            raise FitError(f"approach 2 needs at least 2 IsoFLOP budgets with an interior loss minimum; found {len(rows)} (budgets are grouped within {budget_tol:.0%} compute; see --budget-tol)")
        diagnostics = {"budgets": rows, "n_budgets": len(rows), "n_groups": int(np.unique(groups).size), "skipped_budgets": notes}
    else:
        params, rows = approach1(N, D, L, C, n_bins=n_bins)
        settings.update({"n_bins": n_bins, "method": "lowest loss per log-compute bin; OLS of log N, log D on log C"})
        if params is None:
            raise FitError("approach 1 found fewer than 2 envelope points with different N")
        diagnostics = {"envelope": rows, "n_envelope_points": len(rows)}
        if "run" not in df.columns or df["run"].nunique() == len(df):
            warnings.append("approach 1 on one final loss per run: the envelope is coarse; Approach 2 or 3 is more reliable here")
    if len(rows) < 3:
        warnings.append(f"only {len(rows)} frontier points: a and b are barely constrained")
    objective = None
    intervals = {}
    boot = None
    if bootstrap:
        if approach == 2:
            idxs = bs.resample_indices(len(N), bootstrap, seed, groups=groups)
            one = lambda idx: approach2(N[idx], D[idx], L[idx], C[idx], groups=groups[idx])[0]  # noqa: E731
        else:
            idxs = bs.resample_indices(len(N), bootstrap, seed)
            one = lambda idx: approach1(N[idx], D[idx], L[idx], C[idx], n_bins=n_bins)[0]  # noqa: E731
        t = time.perf_counter()
        samples, failed = bs.run_bootstrap(one, idxs)
        keys = ("a", "b", "N_coef", "D_coef")
        intervals = bs.percentile_intervals({k: samples[k] for k in keys if k in samples}, ci)
        boot = {"n": bootstrap, "failed": failed, "seed": seed, "ci": ci, "seconds": time.perf_counter() - t,
                "method": "resample runs with replacement" + (" within each budget" if approach == 2 else "") + "; percentile intervals",
                "standard_errors": bs.standard_errors({k: samples[k] for k in keys if k in samples}), "samples": {k: samples[k] for k in keys if k in samples}}
        if failed:
            warnings.append(f"{failed} of {bootstrap} bootstrap resamples gave no frontier fit")
    from scaling.laws import FrontierLaw

    law = FrontierLaw(N_coef=params["N_coef"], a=params["a"], D_coef=params["D_coef"], b=params["b"])
    derived = []
    for c in compute or _compute_grid(C):
        n, d = law.compute_optimal(c)
        derived.append({"C": c, "N_opt": float(n), "D_opt": float(d), "extrapolation_factor": c / float(C.max())})
    diagnostics.update({"r2_N": params.pop("r2_N"), "r2_D": params.pop("r2_D")})
    out = {"params": params, "intervals": intervals, "objective": objective, "diagnostics": diagnostics, "derived": derived}
    if boot:
        out["bootstrap"] = boot
    return out


def _holdout_report(rec: FitRecord, held) -> dict:
    """Relative error of the fitted law on the held-out (largest) runs."""
    if rec["approach"] != 3:
        # frontier fits predict allocation, not loss: compare the N_opt at held-out budgets instead
        return {"n_points": len(held), "note": "approaches 1/2 do not predict loss; held-out runs were excluded from the fit only", "mean_abs_rel_error": float("nan"), "max_abs_rel_error": float("nan")}
    law = rec.law()
    pred = law.predict(held["N"].to_numpy(float), held["D"].to_numpy(float), **({"U": held["U"].to_numpy(float)} if "U" in held and rec["settings"].get("law") == "data-constrained" else {}))
    obs = held["loss"].to_numpy(float)
    rel = (pred - obs) / obs
    return {
        "n_points": len(held),
        "rule": "runs with N >= the (1 - holdout_fraction) quantile of N",
        "N_min": float(held["N"].min()),
        "mean_abs_rel_error": float(np.mean(np.abs(rel))),
        "max_abs_rel_error": float(np.max(np.abs(rel))),
        "mean_rel_error": float(np.mean(rel)),
        "points": [{"N": float(n), "D": float(d), "loss": float(o), "pred": float(p)} for n, d, o, p in zip(held["N"], held["D"], obs, pred)],
    }
