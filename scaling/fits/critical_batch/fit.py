"""`fit_critical_batch`: the points (points.py), one S(B) fit per (model, target) (mccandlish.py), the laws
across them (laws.py), the bootstrap (bootstrap.py), all in one FitRecord (record.py)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from scaling.core.blas import blas_single_thread
from scaling.core.conventions import default_compute
from scaling.core.errors import InputError
from scaling.core.selection import distinct, group_by_tolerance
from scaling.fits import pipeline
from scaling.fits import steps_to_target as stt
from scaling.fits.critical_batch.bootstrap import bootstrap_runs
from scaling.fits.critical_batch.laws import across, holdout_largest, primary
from scaling.fits.critical_batch.mccandlish import IDENTIFIED_FACTOR, MIN_BATCHES, build_rows, fit_keys, fit_rows
from scaling.fits.critical_batch.points import run_points, table_points
from scaling.fits.critical_batch.record import CriticalBatchRecord
from scaling.fits.record import FitRecord, data_sha256

DEFINITION = (
    "B_crit = E_min / S_min from S = S_min (1 + B_crit / B), S = optimizer steps to first reach the target loss"
)
D_DEFINITION = "D = 2 E_min: tokens to reach the target when training at B = B_crit"
OVERHEAD20 = (
    "B_20 = B_crit/5 + 1.2 B_ref (Zhang et al. 2024: 20% more steps "
    "than linear scaling from B_ref); B_ref = smallest batch tested"
)


@blas_single_thread
def fit_critical_batch(
    data,
    *,
    bootstrap: int = 0,
    seed: int = 0,
    columns=None,
    n_kind: str = "total",
    ci: float = 0.95,
    target_loss=None,
    metric: str = "loss",
    smooth: float | None = None,
    holdout: str | None = None,
) -> FitRecord:
    """Per-(model, target) S_min, E_min, B_crit and the laws across them; returns a FitRecord.

    `data`: DataFrame / table path (steps already to a target) or a run-directory tree (steps to
    target from metrics.jsonl). `target_loss`: list of targets (run directories; default: chosen
    per model so every batch size reaches them). `metric`: 'loss' or 'val_loss'. `smooth`: smoothing
    bandwidth, relative half-width of the window in steps (default 0.1 for loss, 0 for val_loss).
    `holdout='largest'`: predict the largest-compute model's B_crit from the laws fitted on the others.
    `bootstrap`: resample runs within each model size."""
    target_loss = _check_curve_options(target_loss, metric, smooth)
    pipeline.FitOptions(bootstrap=bootstrap, seed=seed, ci=ci, holdout=holdout).check()
    ds = pipeline.load(data, columns, n_kind)
    from_runs = "run" in ds.df.columns and ds.source != "DataFrame" and Path(ds.source).is_dir()
    if not from_runs and (target_loss or metric != "loss" or smooth is not None):
        raise InputError(
            "--target-loss, --metric and --smooth read loss curves: they need a run-directory tree "
            "(a table's steps are already steps to its target; put that target in a 'loss' column)"
        )
    warnings = list(ds.warnings)
    t0 = time.perf_counter()
    table: list[dict] = []
    if from_runs:
        pts, info, table = run_points(ds, target_loss, metric, smooth, warnings)
    else:
        pts, info = table_points(ds)
    if len(pts["S"]) == 0:
        said = f" (targets {target_loss})" if target_loss else f" ({'; '.join(warnings[-2:])})" if warnings else ""
        raise InputError("critical-batch: no run reached any target loss" + said)
    model = group_by_tolerance(pts["N"], 0.01)
    pts["key_model"] = model
    keys = fit_keys(pts, model)
    rows = build_rows(pts, model, keys, fit_rows(pts, keys), table, warnings)
    if not rows:
        raise InputError(
            f"critical-batch: no model size has runs at {MIN_BATCHES} or more batch sizes reaching a target"
            + ("; " + "; ".join(warnings[-3:]) if warnings else "")
        )
    if from_runs:
        warnings.extend(_one_lr_warnings(pts, model))
    for r in rows:
        r["primary"] = any(p is r for p in primary(rows))
    params, why = across(rows)
    if len({r["group"] for r in rows}) < 2:
        warnings.append("only one model size: bcrit_coef and bcrit_exp_N are not identified")
    compute = {int(g): float(np.max(pts["compute"][model == g])) for g in np.unique(model)}
    ho = holdout_largest(rows, compute) if holdout == "largest" else None
    intervals, boot = {}, None
    if bootstrap:
        intervals, boot = bootstrap_runs(pts, model, keys, rows, params, bootstrap, seed, ci, warnings)
    for r in rows:
        r.pop("_runs", None)
    sha = _data_sha256(pts, ds, from_runs)
    settings = _settings(info, bootstrap, seed, ci, holdout)
    return pipeline.record(
        law="critical-batch",
        approach=None,
        params=params,
        intervals=intervals,
        objective=None,
        n_points=len(set(pts["run"])) if from_runs else len(ds.df),
        warnings=warnings,
        data_sha256=sha,
        n_kind=ds.n_kind,
        source=ds.source,
        columns=ds.columns,
        conventions={
            "compute": default_compute(ds.n_kind),
            "n_kind": ds.n_kind,
            "n_source": ds.n_source,
            "batch": "tokens per optimizer step",
            "D": "tokens to the target at B_crit",
        },
        models=rows,
        settings=settings,
        diagnostics={
            "n_models": len({r["group"] for r in rows}),
            "n_fits": len(rows),
            "not_fitted": why,
            "fit_seconds": time.perf_counter() - t0,
        },
        **({"steps_to_target": table} if table else {}),
        holdout=ho,
        bootstrap=boot,
        cls=CriticalBatchRecord,
    )


def _check_curve_options(target_loss, metric: str, smooth: float | None) -> list | None:
    """The curve-reading options checked before any work; the targets as a list."""
    if metric not in stt.METRICS:
        raise InputError(f"--metric {metric!r}: choose from {', '.join(stt.METRICS)}")
    if smooth is not None and not (np.isfinite(smooth) and 0 <= smooth <= 1):
        raise InputError(
            f"--smooth {smooth}: the window's relative half-width in steps "
            "must be in [0, 1] (0 = no smoothing; default 0.1 for loss)"
        )
    if target_loss is None:
        return None
    target_loss = list(target_loss)
    bad = [t for t in target_loss if not (isinstance(t, (int, float)) and np.isfinite(t) and t > 0)]
    if bad or not target_loss:
        raise InputError(f"--target-loss {bad[0] if bad else '(empty)'}: targets must be finite losses > 0")
    return target_loss


def _one_lr_warnings(pts: dict, model: np.ndarray) -> list[str]:
    """Models whose runs share one lr across batch sizes bias B_crit low: say so."""
    fixed = [
        f"{pts['N'][model == g].mean():.3g}"
        for g in np.unique(model)
        if np.isfinite(pts["lr"][model == g]).all() and distinct(pts["lr"][model == g], 0.01) == 1
    ]
    if not fixed:
        return []
    return [
        f"model(s) N~{', '.join(fixed)}: one lr for every batch size; "
        "McCandlish's S(B) assumes the lr tuned per batch size, "
        "so large batches may look slower than they are (B_crit biased low)"
    ]


def _data_sha256(pts: dict, ds, from_runs: bool) -> str:
    """The data's hash: of the steps to target read from runs, else of the table's columns."""
    if not from_runs:
        return data_sha256(ds.df, ["N", "batch_tokens", "steps"])
    import pandas as pd  # deferred: pandas is slow to import

    hashed = pd.DataFrame({"N": pts["N"], "batch_tokens": pts["B"], "steps": pts["S"], "target": pts["target"]})
    return data_sha256(hashed, list(hashed.columns))


def _settings(info: dict, bootstrap: int, seed: int, ci: float, holdout: str | None) -> dict:
    """The record's settings: the definitions it uses, how its points were read (`info`) and the options."""
    return {
        "definition": DEFINITION,
        "batch_unit": "tokens",
        "D_definition": D_DEFINITION,
        "overhead20_definition": OVERHEAD20,
        "per_batch": "fastest learning rate per batch size; repeats of one (batch, lr) enter as their geometric mean",
        "min_batches": MIN_BATCHES,
        "identified_if": f"B_crit within {IDENTIFIED_FACTOR:g}x of the tested batch range (else kept out of the laws)",
        "bcrit_N_rows": "each model's lowest target",
        **info,
        "bootstrap": bootstrap,
        "seed": seed,
        "ci": ci,
        "holdout": holdout,
    }
