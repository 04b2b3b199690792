"""`scalelab fit moe`: Krajewski's L(N, D, G) or Clark's L(N, E) through the shared fit pipeline.

validate -> (hold out the largest runs) -> summed-Huber fit (scaling.fits.moe.objectives) -> bootstrap
-> holdout error -> record. The record: law `moe`, settings.law `krajewski` | `clark`, params
(krajewski: c, g, gamma, a, alpha, b, beta; clark: a, b, c, d; null = not identified), intervals,
conventions {n_kind: active_non_embedding, compute: 6ND_active_nonembed}, `design` (the data's
expert counts, granularities, expansion rate and top-k per G, which `plan` builds on), derived
optima (scaling.fits.moe.optimum), warnings on identification, bounds and design, and with run
directories the training recipe and the runs' common `model.moe` settings.
"""

from __future__ import annotations

import time

import numpy as np

from scaling.core import bootstrap as bs
from scaling.core.blas import blas_single_thread
from scaling.core.diagnostics import compute_grid, extrapolation_warning, huber_diagnostics, identification_warnings
from scaling.core.errors import FitError, InputError
from scaling.core.huber import DELTA
from scaling.core.selection import distinct, holdout_by_compute, holdout_split
from scaling.data import inputs
from scaling.data.moe_inputs import N_KIND, check_shapes, load_moe
from scaling.data.recipe import read_recipe, recipe_warning
from scaling.fits import pipeline
from scaling.fits.chinchilla import huber_fit as ch
from scaling.fits.moe import objectives as mo
from scaling.fits.moe.clark import fit_clark_body
from scaling.fits.moe.design import bound_warnings, design_section, design_warnings, interval_warnings, moe_recipe
from scaling.fits.moe.optimum import candidates, compute_multiplier, krajewski_at, krajewski_best
from scaling.fits.record import FitRecord, _clean, data_sha256
from scaling.laws.moe import LAWS, law_from_params, law_from_samples

COMPUTE = "6ND_active_nonembed"  # C = 6 N D, N = active non-embedding parameters
MIN_POINTS = {"krajewski": 8, "clark": 5}
REQUIRED = {"krajewski": ("N", "D", "G", "loss"), "clark": ("N", "E", "loss")}


@blas_single_thread
def fit_moe(
    data,
    *,
    law: str = "krajewski",
    bootstrap: int = 0,
    seed: int = 0,
    ci: float = 0.95,
    holdout: str | None = None,
    holdout_fraction: float = 0.1,
    budget_tol: float = 0.15,
    columns: dict[str, str] | None = None,
    top_k: int = 32,
    bootstrap_top_k: int = 2,
    delta: float = DELTA,
    at_compute: list[float] | None = None,
) -> FitRecord:
    """Fit an MoE scaling law to `data` (DataFrame / table path / run-directory tree); see the module doc."""
    if law not in LAWS:
        raise InputError(f"--law must be one of {', '.join(LAWS)} (got {law!r})")
    pipeline.FitOptions(bootstrap=bootstrap, seed=seed, ci=ci, holdout=holdout).check()
    if top_k < 1:
        raise InputError(f"--top-k must be >= 1 (got {top_k})")
    if not delta > 0:
        raise InputError(f"--delta must be > 0 (got {delta})")
    ds = data if isinstance(data, inputs.Dataset) else load_moe(data, columns)
    roles = REQUIRED[law] + tuple(r for r in ("D", "G", "E") if r in ds.df.columns and r not in REQUIRED[law])
    inputs.validate(ds, roles, min_points=MIN_POINTS[law], law=f"moe --law {law}")
    check_shapes(ds)
    df, warnings = ds.df, list(ds.warnings)
    C_all = 6.0 * df["N"].to_numpy(float) * df["D"].to_numpy(float) if "D" in df.columns else None
    paths = df["path"] if "path" in df.columns else None
    recipe = read_recipe(paths) if paths is not None else None
    warnings.extend(w for w in [recipe_warning(recipe)] if w)
    held, C = None, C_all
    if holdout:
        if C_all is not None:
            df, held, C, held_C, rule = holdout_by_compute(df, C_all, holdout_fraction, budget_tol)
        else:
            df, held = holdout_split(df, holdout_fraction, "N")
            rule = f"runs with N at or above the {1 - holdout_fraction:.0%} quantile ({len(held)} runs)"
        if len(df) < MIN_POINTS[law]:
            raise InputError(f"--holdout largest leaves {len(df)} points to fit (need {MIN_POINTS[law]})")
    warnings.extend(design_warnings(df, law))
    t0 = time.perf_counter()
    if law == "krajewski":
        body = _krajewski(
            df,
            C,
            warnings,
            top_k=top_k,
            bootstrap=bootstrap,
            boot_top_k=bootstrap_top_k,
            seed=seed,
            delta=delta,
            ci=ci,
            at_compute=at_compute,
        )
    else:
        body = fit_clark_body(df, warnings, bootstrap=bootstrap, seed=seed, delta=delta, ci=ci)
    body["diagnostics"]["fit_seconds"] = time.perf_counter() - t0
    rng = {k: [float(df[k].min()), float(df[k].max())] for k in ("N", "D", "G", "E", "loss") if k in df.columns}
    if C is not None:
        rng["C"] = [float(np.min(C)), float(np.max(C))]
    settings = {
        "law": law,
        "delta": delta,
        "bootstrap": bootstrap,
        "seed": seed,
        "ci": ci,
        "holdout": holdout,
        "holdout_fraction": holdout_fraction if holdout else None,
        **body.pop("settings"),
    }
    rec = pipeline.record(
        law="moe",
        approach=None,
        n_points=len(df),
        warnings=warnings,
        data_sha256=data_sha256(df, [r for r in ("N", "D", "G", "E", "loss") if r in df.columns]),
        n_kind=N_KIND,
        conventions={"compute": COMPUTE if C is not None else None, "n_kind": N_KIND, "n_source": ds.n_source},
        source=ds.source,
        columns=ds.columns,
        settings=settings,
        data_range=rng,
        design=design_section(df),
        **body,
    )
    if recipe:
        rec["recipe"] = _clean(recipe)
    mr = moe_recipe(paths) if paths is not None else None
    if mr:
        rec["moe_recipe"] = _clean(mr)
        if mr["varies"]:
            rec["warnings"].append(
                "the MoE runs differ in model.moe."
                + ", model.moe.".join(mr["varies"])
                + ": a plan reproduces the most common setting"
            )
    if held is not None:
        rec["holdout"] = _clean(_holdout(rec, held, rule))
    return rec


# ---------------------------------------------------------------- Krajewski
def _krajewski(df, C, warnings, *, top_k, bootstrap, boot_top_k, seed, delta, ci, at_compute) -> dict:
    N, D, G, L = (df[c].to_numpy(float) for c in ("N", "D", "G", "loss"))
    warnings.extend(_in_krajewski_names(w) for w in identification_warnings(N, D))
    granular = distinct(G) >= 2
    names: tuple[str, ...]
    obj: mo.KrajewskiObjective | ch.Objective
    if granular:
        res = mo.fit_krajewski(N, D, G, L, top_k=top_k, delta=delta)
        params, names, bounds = mo.krajewski_params(res.x), mo.THETA, mo.BOUNDS
        obj = mo.KrajewskiObjective(N, D, G, L, delta)
        grid = mo.start_grid()
    else:  # one granularity: g / G^gamma + a is one number, the Chinchilla form
        res = ch.fit_theta(N, D, L, top_k=top_k, delta=delta)
        params, names, bounds = mo.chinchilla_as_krajewski(ch.theta_to_params(res.x)), ch.THETA, ch.BOUNDS
        obj = ch.Objective(N, D, L, delta)
        grid = ch.paper_grid()
    bound_warnings(res.x, names, bounds, warnings)
    if not res.success:
        warnings.append(f"optimiser did not converge from the best start: {res.message}")
    resid = obj.residuals(res.x)
    diagnostics = huber_diagnostics(res, names, resid, delta)
    diagnostics["residuals_log"] = [float(r) for r in resid]
    intervals, boot, samples = {}, None, {}
    if bootstrap:
        starts = grid[np.argsort(obj.batch(grid), kind="stable")[:boot_top_k]]

        def one(idx):
            if granular:
                if distinct(G[idx]) < 2:
                    raise FitError("the resample has a single granularity")
                r = mo.fit_krajewski(N[idx], D[idx], G[idx], L[idx], starts=starts, delta=delta, extra_starts=[res.x])
                return mo.krajewski_params(r.x)
            r = ch.fit_theta(N[idx], D[idx], L[idx], grid="full", starts=starts, delta=delta, extra_starts=[res.x])
            return {k: v for k, v in mo.chinchilla_as_krajewski(ch.theta_to_params(r.x)).items() if v is not None}

        b = pipeline.bootstrap(one, bs.resample_indices(len(N), bootstrap, seed), seed=seed, ci=ci)
        samples, intervals = b.samples, b.intervals()
        boot = b.record(
            method="resample runs with replacement; each resample refits the summed Huber; percentile intervals",
            starts=f"full-data optimum + the {boot_top_k} best grid points on the full data",
        )
        if b.failed:
            warnings.append(f"{b.failed} of {bootstrap} bootstrap resamples failed to fit ({b.failure_text()})")
        interval_warnings(intervals, ("c", "a", "alpha", "b", "beta", "g", "gamma"), warnings)
    settings = {
        "form": "L = c + (g / G^gamma + a) / N^alpha + b / D^beta (Krajewski et al. 2024, Eq. 9)",
        "parametrisation": "log L = LSE(LSE(log g - gamma log G, log a) - alpha log N, log b - beta log D, log c)"
        if granular
        else "one granularity in the data: log L = LSE(log a - alpha log "
        "N, log b - beta log D, log c), g = 0, gamma not identified",
        "objective_definition": "sum of Huber(delta) on natural-log loss residuals",
        "top_k": top_k,
        "dense_runs": "E = 1 rows enter at G = 1 (Krajewski et al. fit dense models separately)",
    }
    law = law_from_params("krajewski", params)
    grid_C = sorted(set(compute_grid(C) + list(at_compute or [])))
    derived = _krajewski_derived(law, samples, G, grid_C, float(np.max(C)), ci)
    warnings.extend(w for w in [extrapolation_warning(at_compute, C)] if w)
    return pipeline.fit_fields(params, intervals, float(res.fun), diagnostics, derived, settings, boot)


def _krajewski_derived(law, samples, G, grid_C, cmax, ci) -> list[dict]:
    """At each compute: the best granularity in the data's range, its optimum, the dense (G = 1)
    optimum, the loss gain and the dense-compute multiplier, with bootstrap intervals."""
    grid_G, _ = candidates(G)
    draws = law_from_samples("krajewski", samples) if samples else None
    rows = []
    for c in grid_C:
        best, dense = krajewski_best(law, c, grid_G), krajewski_at(law, c, 1.0)
        row = {
            "C": c,
            "G": best["G"],
            "N_opt": best["N_opt"],
            "D_opt": best["D_opt"],
            "loss_opt": best["loss"],
            "dense_N_opt": float(dense["N_opt"]),
            "dense_D_opt": float(dense["D_opt"]),
            "dense_loss_opt": float(dense["loss"]),
            "gain": float(dense["loss"]) - best["loss"],
            "compute_multiplier": float(compute_multiplier(law, best["G"])),
            "extrapolation_factor": c / cmax,
        }
        if draws is not None:
            m, d = krajewski_at(draws, c, best["G"]), krajewski_at(draws, c, 1.0)
            row.update(
                pipeline.interval_fields(
                    {
                        "N_opt": m["N_opt"],
                        "D_opt": m["D_opt"],
                        "loss_opt": m["loss"],
                        "dense_loss_opt": d["loss"],
                        "gain": d["loss"] - m["loss"],
                        "compute_multiplier": compute_multiplier(draws, best["G"]),
                    },
                    ci,
                )
            )
        rows.append(row)
    return rows


# ---------------------------------------------------------------- checks and holdout
def _in_krajewski_names(text: str) -> str:
    """The shared N/D identification warnings name Chinchilla's A, B, E; here they are a, b, c (E counts experts)."""
    for old, new in (
        ("A, alpha and E", "the N term (a, g, alpha) and c"),
        ("B, beta and E", "b, beta and c"),
        ("A and alpha", "the N term (a, g, alpha)"),
        ("B and beta", "b and beta"),
        ("(E absorbs", "(c absorbs"),
    ):
        text = text.replace(old, new)
    return text


def _holdout(rec: FitRecord, held, rule: str) -> dict:
    """The law fitted without the largest runs, against their observed loss."""
    law = rec.law()
    obs = held["loss"].to_numpy(float)
    N = held["N"].to_numpy(float)
    if rec["settings"]["law"] == "clark":
        pred = law.predict(N, held["E"].to_numpy(float))
    else:
        pred = law.predict(N, held["D"].to_numpy(float), held["G"].to_numpy(float))
    pts = [
        {k: float(held[k].iloc[i]) for k in ("N", "D", "G", "E") if k in held.columns}
        | {"loss": float(obs[i]), "pred": float(pred[i])}
        for i in range(len(held))
    ]
    return pipeline.holdout_report(len(held), rule, "loss", pipeline.rel_errors(pred, obs), signed=True, points=pts)
