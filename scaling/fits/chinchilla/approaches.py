"""`fit_chinchilla`, the entry point: Approaches 1, 2 and 3 on a table or run directory -> a FitRecord.

It chooses and runs the approach; the fits themselves live elsewhere. Approach 3 (default) is the
parametric L(N, D) fit: summed Huber in `scaling.fits.chinchilla.huber_fit`, maximum likelihood in
`scaling.fits.chinchilla.mle`, the data-constrained law in `scaling.fits.chinchilla.data_constrained`.
Approaches 1 and 2 are the non-parametric frontier fits of `scaling.fits.chinchilla.isoflop`.
Validation, bootstrap, holdout and the record are the shared steps of `scaling.fits.pipeline`;
dropping the K highest-loss points is here.
"""

from __future__ import annotations

import time

import numpy as np

from scaling.core.blas import blas_single_thread
from scaling.core.conventions import (
    TokenCost,
    check_kinds,
    compute_column,
    default_compute,
    drop_embedding_dominated,
    embedding_warning,
    isoflop_budget_convention,
)
from scaling.core.diagnostics import (
    at_bound,
    compute_grid,
    extrapolation_warning,
    huber_diagnostics,
    identification_warnings,
)
from scaling.core.errors import InputError
from scaling.core.selection import drop_highest, holdout_by_compute
from scaling.data import inputs
from scaling.data.recipe import read_recipe, recipe_warning
from scaling.fits import pipeline
from scaling.fits.chinchilla.data_constrained import fit_data_constrained
from scaling.fits.chinchilla.frontier import fit_frontier
from scaling.fits.chinchilla.huber_fit import BOUNDS, THETA, Objective, fit_theta, paper_grid, theta_to_params
from scaling.fits.chinchilla.isoflop import (
    approach1,
    approach2,
)
from scaling.fits.chinchilla.mle import MLE_BOOTSTRAP_METHOD, fit_theta_mle, refit_mle, sigma_warnings
from scaling.fits.chinchilla.options import ChinchillaOptions
from scaling.fits.chinchilla.resampling import identification, resample_runs
from scaling.fits.record import FitRecord, _clean, data_sha256
from scaling.laws.allocation import allocate, optimal, search_range
from scaling.laws.loss import ChinchillaLaw

CORE = ("E", "A", "B", "alpha", "beta")
EPOCHS_WARN = 4.0  # Muennighoff et al. 2023: up to ~4 epochs of repeated data are nearly as good as new


@blas_single_thread
def fit_chinchilla(data, options: ChinchillaOptions | None = None, /, **kw) -> FitRecord:
    """Fit the Chinchilla law (approach 3) or frontier (approaches 1, 2) to `data`.

    data: DataFrame / CSV / Parquet path / run-directory tree with N, D (or flops), loss.
    options: a ChinchillaOptions (scaling/fits/chinchilla/options.py: every choice, documented there);
    keyword arguments replace its fields (`fit_chinchilla(df, approach=2, bootstrap=200)`; the old
    name `drop_highest_k` is `drop_highest`). The options are checked before any work and not changed.
    """
    o = ChinchillaOptions.of(options, **kw).check()
    ds = pipeline.load(data, o.columns, o.n_kind)
    check_kinds(ds.n_kind, o.compute_kind)
    min_pts = {1: 3, 2: 6, 3: 6}[o.approach]
    roles = ("N", "D", "loss", "U") if o.law == "data-constrained" else ("N", "D", "loss")
    min_pts += o.law == "data-constrained"
    inputs.validate(
        ds,
        roles,
        min_points=min_pts,
        law="chinchilla --law data-constrained" if o.law == "data-constrained" else f"chinchilla approach {o.approach}",
    )
    df, dropped = drop_embedding_dominated(ds.df, o.max_embedding_fraction)
    df = drop_highest(df, o.drop_highest)
    if len(df) < min_pts:
        raise InputError(
            f"chinchilla approach {o.approach}: too few points after --drop-highest: {len(df)} (need {min_pts})"
        )
    warnings = list(ds.warnings) + ([dropped] if dropped else [])
    compute_kind = _resolve_compute(df, ds.n_kind, o.compute_kind, warnings)
    C_all = compute_column(df, compute_kind, ds.n_kind)
    warnings.extend(w for w in (embedding_warning(df), _repetition_warning(df)) if w)
    recipe = read_recipe(df["path"]) if "path" in df.columns else None
    if recipe_warning(recipe):
        warnings.append(recipe_warning(recipe))
    held = held_C = None
    C = C_all
    if o.holdout == "largest":
        df, held, C, held_C, rule = holdout_by_compute(df, C_all, o.holdout_fraction, o.budget_tol)
        if len(df) < min_pts:
            raise InputError(f"--holdout largest leaves {len(df)} points to fit (need {min_pts})")
    if o.approach == 2:
        df, C = _budget_members(df, C, warnings)
        if len(df) < min_pts:
            raise InputError(f"chinchilla approach 2: too few runs with an IsoFLOP budget: {len(df)} (need {min_pts})")
    N, D = df["N"].to_numpy(float), df["D"].to_numpy(float)
    curves = o.curves
    if curves is None:  # several rows per run: points of training curves (bootstrap resamples runs)
        curves = "run" in df.columns and df["run"].nunique() < len(df)
    cost = TokenCost.from_runs(N, C, D, compute_kind, ds.n_kind)
    conventions = {"compute": compute_kind, "n_kind": ds.n_kind, "n_source": ds.n_source, "token_cost": cost.to_dict()}
    t0 = time.perf_counter()
    body = _fit_body(o, df, C, cost, warnings, curves)
    body["diagnostics"]["fit_seconds"] = time.perf_counter() - t0
    settings = o.settings(curves) | body.pop("settings")
    rec = pipeline.record(
        law="chinchilla",
        approach=o.approach,
        n_points=len(df),
        data_sha256=data_sha256(df, ["N", "D", "loss"] + (["U"] if o.law == "data-constrained" else [])),
        n_kind=ds.n_kind,
        conventions=conventions,
        source=ds.source,
        columns=ds.columns,
        settings=settings,
        data_range=_data_range(df, N, D, C),
        warnings=warnings,
        **body,
    )
    if recipe:
        rec["recipe"] = _clean(recipe)
    data_info = _data_info(df)
    if data_info:
        rec["data"] = data_info
    if held is not None:
        rec["holdout"] = _clean(_holdout_report(rec, held, held_C, rule))
    return rec


def _fit_body(o: ChinchillaOptions, df, C, cost: TokenCost, warnings: list[str], curves: bool) -> dict:
    """The chosen fit's part of the record (params, intervals, diagnostics, settings, ...): the data-constrained
    law, approach 3's parametric law, or approaches 1-2's frontier."""
    if o.law == "data-constrained":
        return fit_data_constrained(
            df,
            C,
            warnings,
            objective=o.objective,
            grid=o.grid,
            top_k=o.top_k,
            bootstrap=o.bootstrap,
            boot_top_k=o.bootstrap_top_k,
            seed=o.seed,
            delta=o.delta,
            ci=o.ci,
            compute=o.at_compute,
            terms=o.terms or "data+params",
            cost=cost,
            unique=(_data_info(df) or {}).get("unique_tokens"),
        )
    if o.approach == 3:
        return _approach3(
            df,
            C,
            cost,
            warnings,
            curves=curves,
            grid=o.grid,
            top_k=o.top_k,
            bootstrap=o.bootstrap,
            boot_top_k=o.bootstrap_top_k,
            seed=o.seed,
            delta=o.delta,
            ci=o.ci,
            at_compute=o.at_compute,
            objective=o.objective,
        )
    return fit_frontier(
        df,
        C,
        warnings,
        approach=o.approach,
        bootstrap=o.bootstrap,
        seed=o.seed,
        ci=o.ci,
        budget_tol=o.budget_tol,
        n_bins=o.n_bins,
        at_compute=o.at_compute,
        curves=curves,
        weights=o.frontier_weights or "ols",
    )


def _resolve_compute(df, n_kind: str, compute_kind: str | None, warnings: list[str]) -> str:
    """The explicit choice, else the runs' IsoFLOP sweep convention, else 6 N D of the same N.
    A choice that differs from the sweep's is allowed but said: its budgets then spread."""
    swept = isoflop_budget_convention(df)
    if compute_kind is None:
        return swept or default_compute(n_kind)
    if swept and swept != compute_kind:
        warnings.append(
            f"the IsoFLOP sweep sized its runs for equal {swept} per "
            f"budget, but this fit counts compute as {compute_kind}: "
            "budgets are not iso-compute in this convention"
        )
    return compute_kind


def _repetition_warning(df) -> str | None:
    if "epochs" not in df.columns:
        return None
    ep = df["epochs"].to_numpy(float)
    many = np.isfinite(ep) & (ep > EPOCHS_WARN)
    if not many.any():
        return None
    return (
        f"{int(many.sum())} of {len(ep)} runs repeated their training data "
        f"more than {EPOCHS_WARN:g} times (up to {np.nanmax(ep):.3g} epochs): "
        "their loss measures memorisation too; use more data or fit --law data-constrained"
    )


def _data_info(df) -> dict | None:
    """Unique training tokens of the runs' data (when they share one data set) and the most epochs."""
    out = {}
    col = "unique_tokens" if "unique_tokens" in df.columns else "U" if "U" in df.columns else None
    if col:
        u = df[col].to_numpy(float)
        u = u[np.isfinite(u)]
        if u.size and np.all(u == u[0]):
            out["unique_tokens"] = float(u[0])
    if "epochs" in df.columns and np.isfinite(df["epochs"].to_numpy(float)).any():
        out["max_epochs"] = float(np.nanmax(df["epochs"].to_numpy(float)))
    return out or None


def _data_range(df, N, D, C) -> dict:
    """Ranges of the fitted runs; `C_budgets`: compute of the runs an IsoFLOP sweep labels with a
    budget (when some carry none: its anchors), what `plan` multiplies."""
    rng = {
        "N": [float(N.min()), float(N.max())],
        "D": [float(D.min()), float(D.max())],
        "C": [float(C.min()), float(C.max())],
        "loss": [float(df.loss.min()), float(df.loss.max())],
    }
    has = _budget_mask(df)
    if has is not None:
        Cb = np.asarray(C, dtype=float)[has]
        rng["C_budgets"] = [float(Cb.min()), float(Cb.max())]
    return rng


def _budget_mask(df):
    """Which runs carry an IsoFLOP budget, when some do and some (the sweep's anchors) do not; else None."""
    if "budget" not in df.columns:
        return None
    has = np.isfinite(df["budget"].to_numpy(float))
    return has if has.any() and not has.all() else None


def _bounds_in_samples(samples: dict, warnings: list[str]) -> None:
    """Resamples whose optimum sits on a bound: the interval's end is then the box's, not the data's."""
    for name, key, to_theta in (("alpha", "alpha", np.asarray), ("beta", "beta", np.asarray), ("E", "e", np.log)):
        vals = np.asarray(samples.get(name) or [], dtype=float)
        vals = vals[np.isfinite(vals) & (vals > 0)] if name == "E" else vals[np.isfinite(vals)]
        if not vals.size:
            continue
        lo, hi = BOUNDS[key]
        th = to_theta(vals)
        at = int(np.sum(np.minimum(th - lo, hi - th) <= 1e-6 * (1 + np.abs(th))))
        if at:
            warnings.append(
                f"{name} sat on its bound in {at} of {vals.size} bootstrap resamples: that end of its interval is the "
                f"fit's box ({key} in [{lo}, {hi}]), not a measurement"
            )


# ---------------------------------------------------------------- approach 3
def _optimum_rows(law, samples, C_grid, cost, n_range, ci, cmax):
    """Derived compute-optimal N, D and loss at each budget, with intervals from the samples."""
    rows = []
    s = {k: np.asarray(samples[k], dtype=float)[:, None] for k in CORE} if samples else None
    for c in C_grid:
        n_opt, d_opt = optimal(law, c, cost, n_range)
        row = {
            "C": c,
            "N_opt": float(n_opt),
            "D_opt": float(d_opt),
            "loss_opt": float(law.predict(n_opt, d_opt)),
            "extrapolation_factor": c / cmax,
        }
        if s:
            draws = ChinchillaLaw(**s)
            with np.errstate(all="ignore"):
                if cost.exact:
                    ns, ds_ = (v[:, 0] for v in draws.compute_optimal(c))
                else:
                    ns, ds_ = allocate(draws.predict, c, cost, n_range)
                ls = ChinchillaLaw(**{k: v[:, 0] for k, v in s.items()}).predict(ns, ds_)
            row.update(pipeline.interval_fields({"N_opt": ns, "D_opt": ds_, "loss_opt": ls}, ci))
        rows.append(row)
    return rows


def _approach3(
    df, C, cost, warnings, *, curves, grid, top_k, bootstrap, boot_top_k, seed, delta, ci, at_compute, objective="huber"
):
    N, D, L = (df[c].to_numpy(float) for c in ("N", "D", "loss"))
    warnings.extend(identification_warnings(N, D))
    if objective == "mle":  # Epoch's headline: likelihood of a Huber-shaped density with free sigma
        res, huber_res = fit_theta_mle(N, D, L, grid=grid, top_k=top_k, delta=delta)
        warnings.extend(sigma_warnings(res))
    else:
        res = fit_theta(N, D, L, grid=grid, top_k=top_k, delta=delta)
    params = theta_to_params(res.x)
    if objective == "mle":
        params["sigma"] = res.sigma
    for k, v in zip(THETA, res.x):
        lo, hi = BOUNDS[k]
        if at_bound(v, lo, hi):
            warnings.append(
                f"parameter {k} stopped on its bound ({v:.6g}; bounds "
                f"[{lo}, {hi}]): the fit is not at an interior optimum"
            )
    if not res.success:
        warnings.append(f"optimiser did not converge from the best start: {res.message}")
    settings = {
        "delta": delta,
        "grid": grid,
        "top_k": None if grid == "full" else top_k,
        "objective": objective,
        "parametrisation": "LSE(a - alpha log N, b - beta log D, e)",
        "objective_definition": "maximum likelihood: log p(r) = -Huber_delta(r/sigma) - log Z(delta) - log "
        "sigma, r = log-loss residual, sigma free; record objective = -log-likelihood"
        if objective == "mle"
        else "sum of Huber(delta) on log residuals",
    }
    resid = Objective(N, D, L, delta).residuals(res.x)
    diagnostics = huber_diagnostics(res, THETA, resid, delta)
    diagnostics["residuals_log"] = [float(r) for r in resid]
    if objective == "mle":
        diagnostics["huber_start_objective"] = float(huber_res.fun)
    law = ChinchillaLaw(**{k: params[k] for k in CORE})
    intervals: dict = {}
    boot = None
    samples: dict = {}
    if bootstrap:
        idxs, settings["resample"] = resample_runs(df, len(N), bootstrap, seed, curves)
        # Starts per resample: the full-data optimum plus the full-data grid ranking's best
        # `boot_top_k` points (ranking once, not per resample; checked to reach the same
        # objective as 32 fresh starts on every tested Epoch resample).

        g = paper_grid()
        boot_starts = g[np.argsort(Objective(N, D, L, delta).batch(g), kind="stable")[:boot_top_k]]

        def one(idx):
            r = fit_theta(
                N[idx], D[idx], L[idx], grid="full", starts=boot_starts, delta=delta, extra_starts=[res.x], polish=False
            )
            return theta_to_params(r.x)

        def one_mle(idx):  # each resample refits the MLE itself (sigma included), warm-started
            r = refit_mle(N[idx], D[idx], L[idx], [res.x, huber_res.x], delta=delta)
            return {**theta_to_params(r.x), "sigma": r.sigma}

        b = pipeline.bootstrap(one_mle if objective == "mle" else one, idxs, seed=seed, ci=ci)
        samples, intervals = b.samples, b.intervals()
        boot = b.record(
            method=MLE_BOOTSTRAP_METHOD if objective == "mle" else settings["resample"],
            starts="full-data MLE and summed-Huber optima"
            if objective == "mle"
            else f"full-data optimum + the {boot_top_k} best grid points on the full data",
        )
        boot["samples"] = {k: samples[k] for k in CORE}  # standard errors of every parameter, samples of the law's
        if b.failed:
            warnings.append(f"{b.failed} of {bootstrap} bootstrap resamples failed to fit ({b.failure_text()})")
        _bounds_in_samples(samples, warnings)
        identification(intervals, warnings)
    cmax = float(C.max())
    grid_C = sorted(set(compute_grid(C) + list(at_compute or [])))
    derived = _optimum_rows(law, samples, grid_C, cost, search_range(N), ci, cmax)
    warnings.extend(w for w in [extrapolation_warning(at_compute, C)] if w)
    return pipeline.fit_fields(params, intervals, res.fun, diagnostics, derived, settings, boot)


def _budget_members(df, C, warnings):
    """Approach 2 fits parabolas at equal compute: when the sweep labels budgets, runs without one
    (an IsoFLOP sweep's `anchors`) are left out, and the record says how many."""
    has = _budget_mask(df)
    if has is None:
        return df, C
    warnings.append(
        f"left out {int((~has).sum())} run(s) without an IsoFLOP budget (the sweep's anchors): "
        "approach 2 fits parabolas to runs at equal compute"
    )
    return df[has].reset_index(drop=True), np.asarray(C)[has]


def _holdout_report(rec: FitRecord, held, held_C, rule: str) -> dict:
    """How well the fit predicts the held-out (largest-compute) runs: loss for approach 3,
    the compute-optimal size N_opt at the held-out budget for approaches 1 and 2."""
    obs = held["loss"].to_numpy(float)
    C_min = float(np.min(held_C))
    if rec["approach"] == 3:
        extra = (
            {"U": held["U"].to_numpy(float)} if "U" in held and rec["settings"].get("law") == "data-constrained" else {}
        )
        pred = rec.law().predict(held["N"].to_numpy(float), held["D"].to_numpy(float), **extra)
        return pipeline.holdout_report(
            len(held),
            rule,
            "loss",
            pipeline.rel_errors(pred, obs),
            signed=True,
            C_min=C_min,
            points=[
                {"N": float(n), "D": float(d), "loss": float(o), "pred": float(p)}
                for n, d, o, p in zip(held["N"], held["D"], obs, pred)
            ],
        )

    N, D = held["N"].to_numpy(float), held["D"].to_numpy(float)
    if rec["approach"] == 2:
        params, rows, notes, _ = approach2(N, D, obs, held_C, groups=np.zeros(len(held), dtype=int))
        rows = rows or []
    else:
        rows = approach1(N, D, obs, held_C, n_bins=1)[1]
    if not rows:
        return pipeline.holdout_report(
            len(held),
            rule,
            "N_opt",
            C_min=C_min,
            note="the held-out runs have no minimum of their own (approach 2 needs 3+ sizes with an interior minimum)",
        )
    pts = []
    for r in rows:
        pred_n, _ = rec.law().compute_optimal(r["C"])
        pts.append(
            {
                "C": r["C"],
                "N_opt_observed": r["N_opt"],
                "N_opt_predicted": float(pred_n),
                "rel_error": float(pred_n / r["N_opt"] - 1),
            }
        )
    return pipeline.holdout_report(len(held), rule, "N_opt", [p["rel_error"] for p in pts], C_min=C_min, points=pts)
