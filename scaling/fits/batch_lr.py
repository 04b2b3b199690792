"""Optimal learning rate and batch size as power laws (DeepSeek LLM and Step Law forms).

Procedure (Step Law's `fit_tool.py`, DeepSeek's "near-optimal" variant):
1. Group runs by (N, D) for form 'nd', or by compute budget C for form 'compute'.
2. In each group locate the optimum: the best run, or (optimum='quadratic') the minimum of a
   quadratic surface of loss in (log lr, log B) fitted to the group's runs.
3. Keep the near-optimal runs: loss <= L_opt * (1 + tol), tol = 0.0025 by default.
   With optimum='quadratic' the fitted optimum itself is the group's point instead.
4. OLS in log space: 'nd':      log lr = log lr_coef + lr_exp_N log N + lr_exp_D log D,
                                log B  = log bs_coef + bs_exp_D log D
                     'compute': log lr = log lr_coef + lr_exp_C log C,  log B = log bs_coef + bs_exp_C log C
   The regressions are centred (x - mean x): the intercepts lr_at_center / bs_at_center are the
   optimum at the sweep's geometric-mean C (or N, D), the quantity the sweep actually measured;
   lr_coef (the value at C = 1) is derived from them and its interval is as wide as the
   extrapolation to C = 1 makes it.
Batch sizes are in tokens. Bootstrap resamples runs within each group.
With fewer than MIN_GROUPS groups no exponent is fitted: a line through two optima has no residual
to test it by (the main job's two budgets gave an objective of 9.5e-30 and exponent intervals
spanning zero), so the record gives each group's optimum only (`diagnostics.groups`, params empty,
settings.exponents saying why) and `plan` and the sweeps' `isoflop.hparams_fit` refuse to use it as a law.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from scaling.core import bootstrap as bs
from scaling.core.blas import blas_single_thread
from scaling.core.conventions import check_kinds, compute_column, default_compute
from scaling.core.errors import FitError, InputError
from scaling.core.regression import ols
from scaling.core.selection import distinct, group_by_tolerance
from scaling.data import inputs
from scaling.data.recipe import read_recipe
from scaling.fits import pipeline
from scaling.fits.record import FitRecord, _clean, data_sha256
from scaling.laws.hparams import ComputeHParamLaw, NDHParamLaw
from scaling.laws.registry import from_record

MIN_GROUPS = 3  # exponents need three or more groups (optima): two determine a line exactly


def exponents_note(n_groups: int, form: str) -> str:
    what = "compute budgets" if form == "compute" else "(N, D) groups"
    return (
        f"not fitted: {n_groups} {what} (exponents need {MIN_GROUPS} or more); the record gives each group's "
        "optimum only"
    )


def _groups(df, form: str, C: np.ndarray, budget_tol: float) -> np.ndarray:
    if form == "compute":
        return group_by_tolerance(C, budget_tol)
    gn = group_by_tolerance(df["N"].to_numpy(float), 0.01)
    gd = group_by_tolerance(df["D"].to_numpy(float), 0.01)
    _, labels = np.unique(np.stack([gn, gd], 1), axis=0, return_inverse=True)
    return labels.ravel()


def _quadratic_optimum(llr, lb, loss):
    """Minimum of loss ~ quadratic(log lr, log B); None if not positive definite or off-range."""
    if llr.size < 6 or distinct(np.exp(llr)) < 3 or distinct(np.exp(lb)) < 3:
        return None
    X = np.column_stack([np.ones_like(llr), llr, lb, llr**2, lb**2, llr * lb])
    c, *_ = np.linalg.lstsq(X, loss, rcond=None)
    H = np.array([[2 * c[3], c[5]], [c[5], 2 * c[4]]])
    if np.any(np.linalg.eigvalsh(H) <= 0):
        return None
    x = np.linalg.solve(H, -c[1:3])
    if not (llr.min() <= x[0] <= llr.max() and lb.min() <= x[1] <= lb.max()):
        return None
    lo = float(c[0] + c[1] * x[0] + c[2] * x[1] + c[3] * x[0] ** 2 + c[4] * x[1] ** 2 + c[5] * x[0] * x[1])
    return float(x[0]), float(x[1]), lo


def select_points(logN, logD, logC, llr, lb, loss, groups, tol: float, optimum: str):
    """Per-group optimum and the regression points. Returns (points dict of arrays, group rows)."""
    pts: dict[str, list[float]] = {k: [] for k in ("logN", "logD", "logC", "llr", "lb", "group")}
    rows = []
    for g in np.unique(groups):
        m = np.flatnonzero(groups == g)
        j = m[np.argmin(loss[m])]
        row: dict[str, Any] = {
            "group": int(g),
            "N": float(np.exp(logN[m].mean())),
            "D": float(np.exp(logD[m].mean())),
            "C": float(np.exp(logC[m].mean())),
            "n_runs": int(m.size),
            "best_loss": float(loss[j]),
            "best_lr": float(np.exp(llr[j])),
            "best_batch_tokens": float(np.exp(lb[j])),
        }
        row["lr_on_grid_edge"] = bool(
            distinct(np.exp(llr[m])) > 1 and (llr[j] <= llr[m].min() or llr[j] >= llr[m].max())
        )
        row["batch_on_grid_edge"] = bool(distinct(np.exp(lb[m])) > 1 and (lb[j] <= lb[m].min() or lb[j] >= lb[m].max()))
        q = _quadratic_optimum(llr[m], lb[m], loss[m]) if optimum == "quadratic" else None
        if optimum == "quadratic" and q is not None:
            # the optimum used is the surface's vertex, inside the grid by construction
            row.update(
                {
                    "opt_lr": float(np.exp(q[0])),
                    "opt_batch_tokens": float(np.exp(q[1])),
                    "opt_loss": q[2],
                    "optimum": "quadratic",
                    "best_run_on_grid_edge": row["lr_on_grid_edge"] or row["batch_on_grid_edge"],
                    "lr_on_grid_edge": False,
                    "batch_on_grid_edge": False,
                }
            )
            for k, v in (
                ("logN", logN[m].mean()),
                ("logD", logD[m].mean()),
                ("logC", logC[m].mean()),
                ("llr", q[0]),
                ("lb", q[1]),
                ("group", g),
            ):
                pts[k].append(v)
            row["n_near_optimal"] = 1
        else:
            near = m[loss[m] <= loss[j] * (1 + tol)]
            row.update(
                {
                    "opt_lr": row["best_lr"],
                    "opt_batch_tokens": row["best_batch_tokens"],
                    "opt_loss": row["best_loss"],
                    "optimum": "best run",
                    "n_near_optimal": int(near.size),
                }
            )
            for k, arr in (("logN", logN), ("logD", logD), ("logC", logC), ("llr", llr), ("lb", lb)):
                pts[k].extend(arr[near].tolist())
            pts["group"].extend([g] * near.size)
        rows.append(row)
    return {k: np.asarray(v, dtype=float) for k, v in pts.items()}, rows


def regress(pts, form: str, center: dict[str, float] | None = None) -> dict[str, float]:
    """Power-law coefficients from the selected points (NaN where not identified).
    `center` (log C, log N, log D) fixes where the intercepts *_at_center are taken (the full
    data's centre, also in bootstrap resamples, so their intervals are comparable)."""
    out: dict[str, float] = {}
    if form == "compute":
        x0 = (center or {}).get("logC", float(pts["logC"].mean()))
        (c, e), _ = ols(pts["logC"] - x0, pts["llr"])
        out.update(lr_at_center=float(np.exp(c)), lr_exp_C=float(e), lr_coef=float(np.exp(c - e * x0)))
        (c, e), _ = ols(pts["logC"] - x0, pts["lb"])
        out.update(bs_at_center=float(np.exp(c)), bs_exp_C=float(e), bs_coef=float(np.exp(c - e * x0)))
        return out
    nN, nD = distinct(np.exp(pts["logN"]), 1e-3), distinct(np.exp(pts["logD"]), 1e-3)
    if nN >= 2 and nD >= 2:
        (c, eN, eD), _ = ols(np.column_stack([pts["logN"], pts["logD"]]), pts["llr"])
    elif nD >= 2:
        (c, eD), _ = ols(pts["logD"], pts["llr"])
        eN = float("nan")
    elif nN >= 2:
        (c, eN), _ = ols(pts["logN"], pts["llr"])
        eD = float("nan")
    else:
        raise FitError("batch-lr (nd): need at least 2 distinct N or D among the near-optimal runs")
    out.update(lr_coef=float(np.exp(c)), lr_exp_N=float(eN), lr_exp_D=float(eD))
    if nD >= 2:
        (c, e), _ = ols(pts["logD"], pts["lb"])
        out.update(bs_coef=float(np.exp(c)), bs_exp_D=float(e))
    else:
        out.update(bs_coef=float(np.exp(pts["lb"].mean())), bs_exp_D=float("nan"))
    return out


@blas_single_thread
def fit_batch_lr(
    data,
    *,
    form: str = "compute",
    near_optimal_tol: float = 0.0025,
    optimum: str = "best",
    bootstrap: int = 0,
    seed: int = 0,
    columns=None,
    n_kind: str = "total",
    compute_kind: str | None = None,
    budget_tol: float = 0.05,
    ci: float = 0.95,
    holdout: str | None = None,
) -> FitRecord:
    """Fit lr_opt and B_opt power laws from an lr x batch sweep; returns a FitRecord.
    holdout='largest': fit without the largest-compute group and report the law's error there."""
    if form not in ("compute", "nd"):
        raise InputError(f"--form must be 'compute' or 'nd' (got {form!r})")
    pipeline.FitOptions(bootstrap=bootstrap, seed=seed, ci=ci, holdout=holdout).check()
    if optimum not in ("best", "quadratic"):
        raise InputError(f"--optimum must be 'best' or 'quadratic' (got {optimum!r})")
    if not near_optimal_tol >= 0:
        raise InputError(f"--near-optimal-tol must be >= 0 (got {near_optimal_tol})")
    ds = pipeline.load(data, columns, n_kind)
    check_kinds(ds.n_kind, compute_kind)
    inputs.validate(ds, ("N", "D", "loss", "lr", "batch_tokens"), min_points=3, law=f"batch-lr ({form})")
    df = ds.df
    warnings = list(ds.warnings)
    t0 = time.perf_counter()
    compute_kind = compute_kind or default_compute(ds.n_kind)
    C = compute_column(df, compute_kind, ds.n_kind)
    groups = _groups(df, form, C, budget_tol)
    held = None
    if holdout:
        top = groups == groups[np.argmax(C)]
        if np.unique(groups).size < 3:
            raise InputError(f"batch-lr --holdout largest needs 3 or more groups (found {np.unique(groups).size})")
        held = {"df": df[top].reset_index(drop=True), "C": C[top]}
        df, C = df[~top].reset_index(drop=True), C[~top]
        groups = _groups(df, form, C, budget_tol)
    logN, logD, logC = np.log(df.N.to_numpy(float)), np.log(df.D.to_numpy(float)), np.log(C)
    llr, lb, loss = np.log(df.lr.to_numpy(float)), np.log(df.batch_tokens.to_numpy(float)), df.loss.to_numpy(float)
    pts, rows = select_points(logN, logD, logC, llr, lb, loss, groups, near_optimal_tol, optimum)
    n_groups = len(rows)
    common: dict[str, Any] = {
        "n_points": len(df),
        "data_sha256": data_sha256(df, ["N", "D", "loss", "lr", "batch_tokens"]),
        "n_kind": ds.n_kind,
        "source": ds.source,
        "columns": ds.columns,
        "conventions": {"compute": compute_kind, "n_kind": ds.n_kind, "n_source": ds.n_source},
        "data_range": {
            "N": [float(df.N.min()), float(df.N.max())],
            "D": [float(df.D.min()), float(df.D.max())],
            "C": [float(C.min()), float(C.max())],
        },
    }
    recipe = read_recipe(df["path"]) if "path" in df.columns else None
    if recipe:  # the runs' training recipe and model shapes: what `study next --law batch-lr --sweep` extends
        common["recipe"] = _clean(recipe)
    settings = {
        "form": form,
        "near_optimal_tol": near_optimal_tol,
        "optimum": optimum,
        "budget_tol": budget_tol if form == "compute" else None,
        "bootstrap": bootstrap,
        "seed": seed,
        "ci": ci,
        "batch_unit": "tokens",
        "holdout": holdout,
    }
    edges = [r for r in rows if r["lr_on_grid_edge"] or r["batch_on_grid_edge"]]
    if edges:
        warnings.append(
            f"{len(edges)} of {n_groups} groups have their optimum on the edge of the lr or batch grid: "
            "the true optimum may lie outside the sweep"
        )
    small = [r for r in rows if r["n_runs"] < 3]
    if small:
        warnings.append(f"{len(small)} groups have fewer than 3 runs: their optimum is barely located")
    if n_groups < MIN_GROUPS:
        return _optima_only(rows, form, warnings, settings, common, bootstrap, t0)
    center = {"logC": float(np.mean([np.log(r["C"]) for r in rows]))}
    params = regress(pts, form, center)
    for k, v in params.items():
        if not np.isfinite(v):
            warnings.append(f"{k} not identified: the sweep does not vary the quantity it multiplies")
    if form == "nd" and distinct(np.exp(pts["logN"]), 1e-3) >= 2 and distinct(np.exp(pts["logD"]), 1e-3) >= 2:
        r = np.corrcoef(pts["logN"], pts["logD"])[0, 1]
        if abs(r) > 0.995:
            warnings.append(
                "lr_exp_N and lr_exp_D are not separately identified: log N and "
                f"log D are collinear in this sweep (corr {r:.4f}); vary N at fixed D"
            )
    intervals, boot = {}, None
    if bootstrap:

        def one(idx):
            p, _ = select_points(
                logN[idx], logD[idx], logC[idx], llr[idx], lb[idx], loss[idx], groups[idx], near_optimal_tol, optimum
            )
            return regress(p, form, center)

        b = pipeline.bootstrap(one, bs.resample_indices(len(df), bootstrap, seed, groups=groups), seed=seed, ci=ci)
        intervals = b.intervals()
        boot = b.record(
            method="resample runs with replacement within each group; percentile intervals", reasons_key=None
        )
    resid_lr = pts["llr"] - np.log(_predict_lr(params, form, pts))
    resid_bs = pts["lb"] - np.log(_predict_bs(params, form, pts))
    return pipeline.record(
        law="batch-lr",
        approach=None,
        params=params,
        intervals=intervals,
        objective=float(resid_lr @ resid_lr),
        warnings=warnings,
        settings={
            **settings,
            "objective": "sum of squared log-lr residuals",
            "center_C": float(np.exp(center["logC"])),
            "exponents": "fitted",
        },
        diagnostics={
            "groups": rows,
            "n_groups": n_groups,
            "n_regression_points": int(pts["llr"].size),
            "fit_seconds": time.perf_counter() - t0,
            "residuals_log_lr": resid_lr.tolist(),
            "residuals_log_batch": resid_bs.tolist(),
        },
        bootstrap=boot,
        holdout=None if held is None else _holdout_report(params, held, form, near_optimal_tol, optimum),
        **common,
    )


def _optima_only(rows, form, warnings, settings, common, bootstrap, t0):
    """The record of a sweep with fewer than MIN_GROUPS groups: each group's optimum, no law."""
    names = "lr_exp_C and bs_exp_C" if form == "compute" else "lr_exp_N, lr_exp_D and bs_exp_D"
    warnings.append(
        f"only {len(rows)} group(s): {names} are not identified (exponents need {MIN_GROUPS} or more "
        "groups); the record gives each group's optimum only (diagnostics.groups)"
    )
    if bootstrap:
        warnings.append("--bootstrap skipped: no exponents to put intervals on")
    return pipeline.record(
        law="batch-lr",
        approach=None,
        params={},
        intervals={},
        objective=None,
        warnings=warnings,
        settings={**settings, "exponents": exponents_note(len(rows), form)},
        diagnostics={"groups": rows, "n_groups": len(rows), "fit_seconds": time.perf_counter() - t0},
        **common,
    )


def _holdout_report(params, held, form, tol, optimum) -> dict:
    """The held-out group's own optimum (lr, batch) vs what the law fitted without it predicts."""
    h = held["df"]
    g = np.zeros(len(h), dtype=int)
    lg = lambda c: np.log(h[c].to_numpy(float))  # noqa: E731
    pts, rows = select_points(
        lg("N"), lg("D"), np.log(held["C"]), lg("lr"), lg("batch_tokens"), h["loss"].to_numpy(float), g, tol, optimum
    )
    r = rows[0]
    law = from_record({"law": "batch-lr", "params": _clean(params), "settings": {"form": form}})
    if not isinstance(law, ComputeHParamLaw | NDHParamLaw):
        raise TypeError(f"a batch-lr record's law is {type(law).__name__}, not an hparam law")
    lr_p, bt_p = law.predict(C=r["C"]) if form == "compute" else law.predict(N=r["N"], D=r["D"])
    lr_p, bt_p = float(np.asarray(lr_p)), float(np.asarray(bt_p))
    return pipeline.holdout_report(
        len(h),
        f"the largest-compute group (C ~ {r['C']:.3g}, {len(h)} runs)",
        "lr_opt, B_opt",
        [lr_p / r["opt_lr"] - 1, bt_p / r["opt_batch_tokens"] - 1],
        points=[
            {
                "C": r["C"],
                "lr_observed": r["opt_lr"],
                "lr_predicted": lr_p,
                "batch_tokens_observed": r["opt_batch_tokens"],
                "batch_tokens_predicted": bt_p,
            }
        ],
    )


def _predict_bs(p, form, pts):
    if form == "compute":
        return p["bs_coef"] * np.exp(pts["logC"]) ** p["bs_exp_C"]
    eD = 0.0 if not np.isfinite(p["bs_exp_D"]) else p["bs_exp_D"]
    return p["bs_coef"] * np.exp(pts["logD"] * eD)


def _predict_lr(p, form, pts):
    if form == "compute":
        return p["lr_coef"] * np.exp(pts["logC"]) ** p["lr_exp_C"]
    eN = 0.0 if not np.isfinite(p["lr_exp_N"]) else p["lr_exp_N"]
    eD = 0.0 if not np.isfinite(p["lr_exp_D"]) else p["lr_exp_D"]
    return p["lr_coef"] * np.exp(pts["logN"] * eN + pts["logD"] * eD)
