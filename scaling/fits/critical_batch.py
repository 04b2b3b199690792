"""Critical batch size from steps-to-target-loss vs batch size (McCandlish et al. 2018).

Per (model size, target loss): fit S(B) = S_min (1 + B_crit/B) = S_min + E_min / B to the number
of optimizer steps S a run with batch B (tokens) needed to first reach the target loss, by least
squares on log S with S_min, E_min > 0. **B_crit = E_min / S_min** (tokens): the batch at which
both steps and tokens are twice their minima. Zhang et al. 2024 report instead the batch with a
20% step overhead over linear scaling from a reference batch B_ref: B_20 = B_crit/5 + 1.2 B_ref
(their notebook's formula with B_ref = 256 sequences); we give it with B_ref = the smallest batch
tested. Each batch size counts its fastest learning rate (McCandlish assumes a tuned lr), repeats
of one (batch, lr) cell enter as their geometric mean.

Inputs: a run-directory tree (steps to target read from each run's metrics.jsonl curve, see
scaling/fits/steps_to_target.py) or a table with columns N, batch_tokens, steps (already steps to a
target) and optionally loss (that target; rows of one model with different targets are separate
fits) and lr.

Across (model, target) fits: B_crit = bcrit_coef N^bcrit_exp_N on each model's lowest target;
B_crit = bcrit_coef_D D^bcrit_exp_D on every fit, D = 2 E_min = tokens to reach the target when
training at B_crit (Zhang et al. 2024, Bergsma et al. 2025: B_crit follows D, not N); jointly
B_crit = bcrit_joint_coef N^bcrit_joint_exp_N D^bcrit_joint_exp_D when N and D are not collinear;
and Kaplan's B_crit(L) = B_star / L^(1/alphaB) over targets.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from rundir.dotted import get_dotted
from rundir.layout import CONFIG, METRICS
from scaling.core import bootstrap as bs
from scaling.core.blas import blas_single_thread
from scaling.core.conventions import default_compute
from scaling.core.errors import FitError, InputError
from scaling.core.regression import ols
from scaling.core.selection import distinct, group_by_tolerance
from scaling.data import inputs
from scaling.fits import pipeline
from scaling.fits import steps_to_target as stt
from scaling.fits.record import FitRecord, data_sha256

MIN_BATCHES = 3
MIN_BOOT = 10  # successful resamples needed before an interval is reported
IDENTIFIED_FACTOR = 4.0  # B_crit beyond 4x outside the tested batches is an extrapolation: kept out of the laws
DEFINITION = (
    "B_crit = E_min / S_min from S = S_min (1 + B_crit / B), S = optimizer steps to first reach the target loss"
)
D_DEFINITION = "D = 2 E_min: tokens to reach the target when training at B = B_crit"
OVERHEAD20 = (
    "B_20 = B_crit/5 + 1.2 B_ref (Zhang et al. 2024: 20% more steps "
    "than linear scaling from B_ref); B_ref = smallest batch tested"
)


def fit_steps_curve(B: np.ndarray, S: np.ndarray) -> tuple[float, float]:
    """(S_min, E_min) minimising sum (log S - log(S_min + E_min/B))^2 with both positive."""
    from scipy.optimize import least_squares  # deferred: scipy.optimize is slow to import

    x = 1.0 / B
    A = np.column_stack([np.ones_like(x), x])
    c, *_ = np.linalg.lstsq(A, S, rcond=None)
    s0 = c[0] if c[0] > 0 else S.min() / 2
    e0 = c[1] if c[1] > 0 else (S.max() - S.min()) * B.min() + 1.0
    fun = lambda p: np.log(np.exp(p[0]) + np.exp(p[1]) * x) - np.log(S)  # noqa: E731
    res = least_squares(fun, [np.log(s0), np.log(e0)], xtol=1e-14, ftol=1e-14, gtol=1e-14, method="lm")
    return float(np.exp(res.x[0])), float(np.exp(res.x[1]))


# ---------------------------------------------------------------- one (model, target)
def _per_batch(B, S, lr) -> list[tuple[float, float, float | None, np.ndarray]]:
    """[(batch, steps, lr, member indices)] per distinct batch: the fastest lr cell, whose
    repeats enter as their geometric mean."""
    out = []
    bg = group_by_tolerance(B, 0.01)
    for b in np.unique(bg):
        m = np.flatnonzero(bg == b)
        ok = np.isfinite(lr[m]) & (lr[m] > 0)
        cells = group_by_tolerance(lr[m], 0.01) if ok.all() else np.zeros(m.size, int)
        best = None
        for c in np.unique(cells):
            mm = m[cells == c]
            s = float(np.exp(np.log(S[mm]).mean()))
            if best is None or s < best[1]:
                best = (float(np.exp(np.log(B[mm]).mean())), s, float(lr[mm[0]]) if ok.all() else None, mm)
        out.append(best)
    return out


def _fit_key(B, S, lr) -> dict | None:
    """The McCandlish fit for one (model, target), or None with fewer than MIN_BATCHES batches."""
    cells = _per_batch(B, S, lr)
    if len(cells) < MIN_BATCHES:
        return None
    bb = np.array([c[0] for c in cells])
    ss = np.array([c[1] for c in cells])
    s_min, e_min = fit_steps_curve(bb, ss)
    bcrit = e_min / s_min
    resid = np.log(ss) - np.log(s_min + e_min / bb)
    lo, hi = float(bb.min()), float(bb.max())
    return {
        "S_min": s_min,
        "E_min": e_min,
        "B_crit": bcrit,
        "B_overhead20": bcrit / 5 + 1.2 * lo,
        "D_at_B_crit": 2 * e_min,
        "B_range": [lo, hi],
        "n_batches": len(cells),
        "rms_log_residual": float(np.sqrt(np.mean(resid**2))),
        "in_laws": bool(lo / IDENTIFIED_FACTOR <= bcrit <= hi * IDENTIFIED_FACTOR),
        "_cells": cells,
    }


def _fit_rows(pts: dict, keys: list[tuple[int, float | None]]) -> dict[tuple, dict]:
    out = {}
    for key in keys:
        m = pts["key_model"] == key[0]
        if key[1] is not None:
            m &= np.isclose(pts["target"], key[1], rtol=1e-9, atol=0)
        if m.sum() == 0:
            continue
        r = _fit_key(pts["B"][m], pts["S"][m], pts["lr"][m])
        if r is not None:
            r["_idx"] = np.flatnonzero(m)
            out[key] = r
    return out


# ---------------------------------------------------------------- across (model, target)
def _primary(rows: list[dict]) -> list[dict]:
    """Each model's lowest-target row among those that enter the laws."""
    best: dict[int, dict] = {}
    for r in rows:
        if not r["in_laws"]:
            continue
        cur = best.get(r["group"])
        t = r["target_loss"] if r["target_loss"] is not None else np.inf
        if cur is None or t < (cur["target_loss"] if cur["target_loss"] is not None else np.inf):
            best[r["group"]] = r
    return [best[g] for g in sorted(best)]


def _across(rows: list[dict]) -> tuple[dict[str, float], dict[str, str]]:
    """The laws across (model, target) fits; returns (params, why-not notes)."""
    out, why = {}, {}
    prim = _primary(rows)
    used = [r for r in rows if r["in_laws"]]
    if distinct(np.array([r["N"] for r in prim] or [1.0])) >= 2:
        (c, e), _ = ols(np.log([r["N"] for r in prim]), np.log([r["B_crit"] for r in prim]))
        out.update(bcrit_coef=float(np.exp(c)), bcrit_exp_N=float(e))
    else:
        why["bcrit_N"] = "fewer than 2 model sizes with an identified B_crit"
    D = np.array([r["D_at_B_crit"] for r in used] or [1.0])
    if distinct(D, 1e-3) >= 2:
        (c, e), _ = ols(np.log(D), np.log([r["B_crit"] for r in used]))
        out.update(bcrit_coef_D=float(np.exp(c)), bcrit_exp_D=float(e))
    else:
        why["bcrit_D"] = "fewer than 2 distinct D among identified fits"
    if len(used) >= 4 and distinct(np.array([r["N"] for r in used])) >= 2 and distinct(D, 1e-3) >= 2:
        X = np.column_stack([np.log([r["N"] for r in used]), np.log(D)])
        corr = np.corrcoef(X.T)[0, 1]
        if abs(corr) < 0.98:
            (c, eN, eD), _ = ols(X, np.log([r["B_crit"] for r in used]))
            out.update(bcrit_joint_coef=float(np.exp(c)), bcrit_joint_exp_N=float(eN), bcrit_joint_exp_D=float(eD))
        else:
            why["bcrit_joint"] = f"log N and log D collinear across fits (corr {corr:.3f})"
    else:
        why["bcrit_joint"] = "needs 4+ identified fits spanning 2+ model sizes and 2+ D"
    withL = [r for r in used if r["target_loss"] is not None]
    if distinct(np.array([r["target_loss"] for r in withL] or [1.0]), 1e-4) >= 2:
        (c, e), _ = ols(np.log([r["target_loss"] for r in withL]), np.log([r["B_crit"] for r in withL]))
        if e < 0:
            out.update(B_star=float(np.exp(c)), alphaB=float(-1.0 / e))
        else:
            why["kaplan"] = (
                f"B_crit does not fall as the target loss falls (slope {e:+.3g} in log-log); B_crit(L) not fitted"
            )
    else:
        why["kaplan"] = "fewer than 2 distinct target losses"
    return out, why


def _holdout(rows: list[dict], compute: dict[int, float]) -> dict:
    """Hold out the largest-compute model: predict its B_crit from the laws fitted on the rest."""
    prim = _primary(rows)
    if len(prim) < 3:
        return {"n_points": 0, "note": "needs 3+ model sizes with an identified B_crit (2 to fit, 1 held out)"}
    g = max((r["group"] for r in prim), key=lambda k: compute[k])
    held = next(r for r in prim if r["group"] == g)
    params, _ = _across([r for r in rows if r["group"] != g])
    out = {
        "model_N": held["N"],
        "target_loss": held["target_loss"],
        "B_crit_fitted": held["B_crit"],
        "D_at_B_crit": held["D_at_B_crit"],
        "n_points": int(held["n_runs"]),
        "held_out_by": "largest compute",
        "note": "B_crit(D) uses the held-out model's own D = 2 E_min: "
        "it tests the law's form, not a forecast from N alone",
    }
    errs = []
    if "bcrit_coef" in params:
        p = params["bcrit_coef"] * held["N"] ** params["bcrit_exp_N"]
        out.update(predicted_from_N=p, rel_error_from_N=p / held["B_crit"] - 1)
        errs.append(abs(out["rel_error_from_N"]))
    if "bcrit_coef_D" in params:
        p = params["bcrit_coef_D"] * held["D_at_B_crit"] ** params["bcrit_exp_D"]
        out.update(predicted_from_D=p, rel_error_from_D=p / held["B_crit"] - 1)
        errs.append(abs(out["rel_error_from_D"]))
    out["fitted_on"] = {k: v for k, v in params.items() if k.startswith("bcrit_")}
    if errs:
        out.update(pipeline.error_summary(errs))
    return out


# ---------------------------------------------------------------- inputs
def _table_points(ds) -> tuple[dict, dict]:
    df = ds.df
    inputs.validate(ds, ("N", "batch_tokens", "steps"), min_points=3, law="critical-batch")
    n = len(df)
    N = df["N"].to_numpy(float)
    target = (
        df["loss"].to_numpy(float).copy()
        if "loss" in df.columns and np.all(np.isfinite(df["loss"].to_numpy(float)))
        else np.full(n, np.nan)
    )
    pts = {
        "run": [str(r) for r in df["run"]] if "run" in df.columns else [f"row {i}" for i in range(n)],
        "ridx": np.arange(n),
        "N": N,
        "B": df["batch_tokens"].to_numpy(float),
        "S": df["steps"].to_numpy(float),
        "lr": df["lr"].to_numpy(float) if "lr" in df.columns else np.full(n, np.nan),
        "target": target,
        "compute": N.copy(),
    }
    info = {
        "input": "table of steps to a target (columns N, batch_tokens, steps[, loss, lr])",
        "targets": {
            "mode": "table",
            "note": "the table's 'loss' column is each row's target"
            if np.isfinite(target).all()
            else "no loss column: targets unknown",
        },
    }
    return pts, info


def _run_points(
    ds, target_loss, metric: str, smooth: float | None, warnings: list[str]
) -> tuple[dict, dict, list[dict]]:
    """Steps to target for every finished run of a run-directory tree (see steps_to_target)."""
    root = Path(ds.source)
    df = ds.df
    runs, curves, cfgs = [], [], []
    for r in df.to_dict("records"):
        N, B = r.get("N"), r.get("batch_tokens")
        if not (_pos(N) and _pos(B)):
            warnings.append(f"run {r['run']}: no parameter count or batch_tokens in summary.json; skipped")
            continue
        path = root / r["run"] / METRICS
        if not path.exists():
            warnings.append(f"run {r['run']}: no metrics.jsonl (steps to target need the loss curve); skipped")
            continue
        curve, why = stt.read_curve(path, metric, smooth)
        if curve is None:
            warnings.append(f"run {r['run']}: {why}; skipped")
            continue
        runs.append(r)
        curves.append(curve)
        cfgs.append(_config(root / r["run"] / CONFIG))
    if not runs:
        raise InputError(f"critical-batch: no finished run under {root} has a '{metric}' curve in metrics.jsonl")
    N = np.array([float(r["N"]) for r in runs])
    B = np.array([float(r["batch_tokens"]) for r in runs])
    lr = np.array([float(r["lr"]) if _pos(r.get("lr")) else np.nan for r in runs])
    model = group_by_tolerance(N, 0.01)
    targets_by_model: dict[int, list[float]] = {}
    for g in np.unique(model):
        idx = np.flatnonzero(model == g)
        if target_loss:
            targets_by_model[int(g)] = sorted(set(float(t) for t in target_loss))
            continue
        bg = group_by_tolerance(B[idx], 0.01)
        cells = [[curves[i] for i in idx[bg == b]] for b in np.unique(bg)]
        t = stt.auto_targets(cells)
        if not t:
            warnings.append(
                f"model N~{N[idx].mean():.3g}: its curves leave no loss level every "
                "batch size reaches below every run's first record; no automatic target"
            )
        targets_by_model[int(g)] = t
    pts = {k: [] for k in ("run", "ridx", "N", "B", "S", "lr", "target", "compute")}
    table, missed = [], {}
    for i, (r, c) in enumerate(zip(runs, curves)):
        for t in targets_by_model[int(model[i])]:
            s, status = stt.first_crossing(c.x, c.loss, t)
            table.append(
                {
                    "run": r["run"],
                    "N": N[i],
                    "batch_tokens": B[i],
                    "lr": None if np.isnan(lr[i]) else lr[i],
                    "target_loss": t,
                    "steps": s,
                    "tokens": None if s is None else s * B[i],
                    "status": status,
                    "best_loss": c.best,
                    "grad_noise_scale_near": stt.noise_near(c, s) if s is not None else None,
                }
            )
            if s is None or s <= 0:
                missed.setdefault(r["run"], []).append((t, status, c))
                continue
            for k, v in (
                ("run", r["run"]),
                ("ridx", i),
                ("N", N[i]),
                ("B", B[i]),
                ("S", s),
                ("lr", lr[i]),
                ("target", t),
                ("compute", _compute(r)),
            ):
                pts[k].append(v)
    for run, items in missed.items():
        never = [f"{t:.4g}" for t, st, _ in items if st == "never"]
        early = [f"{t:.4g}" for t, st, _ in items if st != "never"]
        best = items[0][2].best
        if never:
            warnings.append(
                f"run {run}: never reached target loss {', '.join(never)} (best "
                f"smoothed {metric} {best:.4g}); left out of that target's fit"
            )
        if early:
            warnings.append(
                f"run {run}: {metric} already at or below target {', '.join(early)} at its "
                "first log record (crossing not resolved); left out of that target's fit"
            )
    warnings.extend(_schedule_warnings(runs, cfgs, model, N))
    pts = {k: (np.asarray(v, dtype=float) if k not in ("run",) else v) for k, v in pts.items()}
    pts["ridx"] = pts["ridx"].astype(int)
    bw = stt.DEFAULT_SMOOTH[metric] if smooth is None else smooth
    info = {
        "input": "run directories: steps to target read from each finished run's metrics.jsonl",
        "metric": metric,
        "x_axis": "optimizer updates the logged value reflects (training "
        "loss: centre of its logging window; val_loss: the eval step)",
        "smoothing": (
            "none"
            if bw == 0
            else "local linear regression on log(steps) over the records "
            f"within a factor {1 + bw:g} of each record (no lag)"
        ),
        "smooth_bandwidth": bw,
        "targets": {
            "mode": "given" if target_loss else "auto",
            "rule": None
            if target_loss
            else (
                "per model: the smoothed loss of the floor run at "
                f"{list(stt.AUTO_FRACTIONS)} of its steps, rounded up to 4 decimals; "
                "floor run = the best run (over lr) of the batch size whose "
                "best loss is highest, so every batch size reaches each target"
            ),
            "by_model": {f"{N[model == g].mean():.6g}": t for g, t in targets_by_model.items()},
        },
        "noise_scale": "median over runs of each run's grad_noise_scale measurements within a factor "
        f"{stt.NOISE_WINDOW} of its steps to target (McCandlish B_simple, tokens)",
        "n_runs_read": len(runs),
    }
    return pts, info, table


def _pos(v) -> bool:
    try:
        return bool(np.isfinite(float(v)) and float(v) > 0)
    except (TypeError, ValueError):
        return False


def _compute(r: dict) -> float:
    for v in (r.get("flops"), 6.0 * float(r["N"]) * float(r["D"]) if _pos(r.get("D")) else None):
        if _pos(v):
            return float(v)
    return float(r["N"])


def _config(path: Path) -> dict:
    try:
        return inputs._read_yaml(path) if path.exists() else {}
    except Exception:  # an unreadable config only loses the schedule check
        return {}


def _schedule_warnings(runs, cfgs, model, N) -> list[str]:
    """Runs whose lr at a given step depends on their total length compare steps to target at
    different points of their schedules: say so."""
    out = []
    for g in np.unique(model):
        idx = np.flatnonzero(model == g)
        names = {str(get_dotted(cfgs[i], "schedule.name") or "?") for i in idx}
        totals = {inputs._num(runs[i].get("steps")) for i in idx}
        decaying = names & {"cosine", "linear"}
        if decaying and len(totals) > 1:
            out.append(
                f"model N~{N[idx].mean():.3g}: runs use a {'/'.join(sorted(decaying))} "
                "schedule with different total steps, so their "
                "lr at the target differs by schedule position as well as by batch; prefer "
                "schedule.name constant (or wsd before its decay) for a critical-batch sweep"
            )
    return out


# ---------------------------------------------------------------- noise scale
def _noise_for_row(row: dict, table: list[dict]) -> None:
    vals = [
        t["grad_noise_scale_near"]
        for t in table
        if t["run"] in row["_runs"]
        and t["target_loss"] == row["target_loss"]
        and t["grad_noise_scale_near"] is not None
    ]
    if vals:
        row.update(
            noise_scale=float(np.median(vals)),
            noise_scale_runs=len(vals),
            noise_scale_range=[float(min(vals)), float(max(vals))],
        )
    else:
        row.update(
            noise_scale=None,
            noise_scale_runs=0,
            noise_scale_note="not measured (no grad_noise_scale records near "
            "the target; set train.noise_scale_every_steps)",
        )


def _keys(pts: dict, model: np.ndarray) -> list[tuple[int, float | None]]:
    """One (model group, target) key per fit; equal targets (to 1e-6) are made identical."""
    keys = []
    for g in np.unique(model):
        m = model == g
        ts = pts["target"][m]
        if np.isnan(ts).all():
            keys.append((int(g), None))
            continue
        tg = group_by_tolerance(ts, 1e-6)
        for k in np.unique(tg):
            t = float(ts[tg == k][0])
            pts["target"][np.flatnonzero(m)[tg == k]] = t
            keys.append((int(g), t))
    return keys


def _build_rows(pts: dict, model: np.ndarray, keys, fits: dict, table: list[dict], warnings: list[str]) -> list[dict]:
    """The record's `models` rows (one per fitted (model, target)), with their warnings."""
    rows = []
    for key in keys:
        m = model == key[0]
        n = float(np.exp(np.log(pts["N"][m]).mean()))
        tl = "" if key[1] is None else f" target {key[1]:.4g}"
        if key not in fits:
            m2 = m if key[1] is None else m & (pts["target"] == key[1])
            warnings.append(
                f"model N~{n:.3g}{tl}: only {distinct(pts['B'][m2], 0.01)} "
                f"batch size(s) reach it (< {MIN_BATCHES}); no fit"
            )
            continue
        f = fits[key]
        run_names = sorted({pts["run"][i] for i in f["_idx"]})
        row = {
            "N": n,
            "group": key[0],
            "target_loss": key[1],
            "n_runs": len(run_names),
            "_runs": run_names,
            **{k: v for k, v in f.items() if not k.startswith("_")},
        }
        row["points"] = [
            {"batch_tokens": b, "steps": s, "tokens": b * s, "lr": lr_, "runs": [pts["run"][i] for i in mm]}
            for b, s, lr_, mm in f["_cells"]
        ]
        lo, hi = row["B_range"]
        if not lo <= row["B_crit"] <= hi:
            warnings.append(
                f"model N~{n:.3g}{tl}: B_crit={row['B_crit']:.3g} lies outside "
                f"the tested batch range [{lo:.3g}, {hi:.3g}] (extrapolated)"
                + (
                    ""
                    if row["in_laws"]
                    else f"; more than {IDENTIFIED_FACTOR:g}x outside, so left out of the across-model laws"
                )
            )
        if table:
            _noise_for_row(row, table)
        rows.append(row)
    return rows


# ---------------------------------------------------------------- the fit
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
    if metric not in stt.METRICS:
        raise InputError(f"--metric {metric!r}: choose from {', '.join(stt.METRICS)}")
    if smooth is not None and not (np.isfinite(smooth) and 0 <= smooth <= 1):
        raise InputError(
            f"--smooth {smooth}: the window's relative half-width in steps "
            "must be in [0, 1] (0 = no smoothing; default 0.1 for loss)"
        )
    if target_loss is not None:
        target_loss = list(target_loss)
        bad = [t for t in target_loss if not (isinstance(t, (int, float)) and np.isfinite(t) and t > 0)]
        if bad or not target_loss:
            raise InputError(f"--target-loss {bad[0] if bad else '(empty)'}: targets must be finite losses > 0")
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
        pts, info, table = _run_points(ds, target_loss, metric, smooth, warnings)
    else:
        pts, info = _table_points(ds)
    if len(pts["S"]) == 0:
        why = f" (targets {target_loss})" if target_loss else f" ({'; '.join(warnings[-2:])})" if warnings else ""
        raise InputError("critical-batch: no run reached any target loss" + why)
    model = group_by_tolerance(pts["N"], 0.01)
    pts["key_model"] = model
    keys = _keys(pts, model)
    rows = _build_rows(pts, model, keys, _fit_rows(pts, keys), table, warnings)
    if not rows:
        raise InputError(
            f"critical-batch: no model size has runs at {MIN_BATCHES} or more batch sizes reaching a target"
            + ("; " + "; ".join(warnings[-3:]) if warnings else "")
        )
    if from_runs:
        fixed = [
            f"{pts['N'][model == g].mean():.3g}"
            for g in np.unique(model)
            if np.isfinite(pts["lr"][model == g]).all() and distinct(pts["lr"][model == g], 0.01) == 1
        ]
        if fixed:
            warnings.append(
                f"model(s) N~{', '.join(fixed)}: one lr for every batch size; "
                "McCandlish's S(B) assumes the lr tuned per batch size, "
                "so large batches may look slower than they are (B_crit biased low)"
            )
    for r in rows:
        r["primary"] = any(p is r for p in _primary(rows))
    params, why = _across(rows)
    if len({r["group"] for r in rows}) < 2:
        warnings.append("only one model size: bcrit_coef and bcrit_exp_N are not identified")
    compute = {int(g): float(np.max(pts["compute"][model == g])) for g in np.unique(model)}
    ho = _holdout(rows, compute) if holdout == "largest" else None
    intervals, boot = {}, None
    if bootstrap:
        intervals, boot = _bootstrap(pts, model, keys, rows, params, bootstrap, seed, ci, warnings)
    for r in rows:
        r.pop("_runs", None)
    if from_runs:
        import pandas as pd  # deferred: pandas is slow to import

        hashed = pd.DataFrame({"N": pts["N"], "batch_tokens": pts["B"], "steps": pts["S"], "target": pts["target"]})
        sha = data_sha256(hashed, list(hashed.columns))
    else:
        sha = data_sha256(ds.df, ["N", "batch_tokens", "steps"])
    settings = {
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


def _informative(vals) -> bool:
    v = np.asarray(vals, dtype=float)
    v = v[np.isfinite(v)]
    return v.size >= MIN_BOOT and float(np.ptp(v)) > 1e-12 * float(np.abs(v).max())


def _bootstrap(pts, model, keys, rows, params, n_boot: int, seed: int, ci: float, warnings: list[str]):
    """Resample runs (whole runs, never points of a curve) within each model size; targets stay
    fixed. A resample that loses a law the full data supports is a counted, explained failure;
    any other exception is a bug and fails the fit."""
    runs = np.unique(pts["ridx"])
    run_model = np.array([model[np.flatnonzero(pts["ridx"] == r)[0]] for r in runs])
    by_run = {int(r): np.flatnonzero(pts["ridx"] == r) for r in runs}
    per_row: dict[tuple, list[float]] = {(r["group"], r["target_loss"]): [] for r in rows}
    want = set(params)

    def one(idx):
        sel = np.concatenate([by_run[int(runs[i])] for i in idx])
        sub = {k: (v[sel] if isinstance(v, np.ndarray) else [v[i] for i in sel]) for k, v in pts.items()}
        fits = _fit_rows(sub, keys)
        rr = []
        for key, f in fits.items():
            if key in per_row:
                per_row[key].append(f["B_crit"])
            n = float(np.exp(np.log(sub["N"][f["_idx"]]).mean()))
            rr.append({"N": n, "group": key[0], "target_loss": key[1], **f})
        p, _ = _across(rr)
        lost = sorted(want - set(p))
        if lost:
            raise FitError(
                f"resample left {len(fits)} of {len(rows)} (model, target) fits "
                f"with {MIN_BATCHES}+ batch sizes: too few for {', '.join(lost)}"
            )
        return p

    b = pipeline.bootstrap(one, bs.resample_indices(len(runs), n_boot, seed, groups=run_model), seed=seed, ci=ci)
    samples = b.samples
    intervals = {k: v for k, v in b.intervals().items() if _informative(samples[k])}
    for r in rows:
        vals = per_row[(r["group"], r["target_loss"])]
        r["B_crit_bootstrap_n"] = len(vals)
        if _informative(vals):
            r["B_crit_interval"] = pipeline.interval(vals, ci)
    if any(not _informative(v) for v in list(per_row.values()) + list(samples.values())) or len(samples) < len(want):
        warnings.append(
            f"bootstrap: some quantities have no interval (fewer than {MIN_BOOT} successful resamples, or all alike: "
            "with one run per batch size, resampling runs mostly drops "
            "batch sizes; repeat runs or more batch sizes give intervals)"
        )
    boot = b.record(
        method="resample runs within each model size (targets fixed); percentile intervals; "
        f"a (model, target) fit is skipped in a resample keeping fewer than {MIN_BATCHES} batch sizes",
        reasons_key="failed_reasons",
        standard_errors=False,
    )
    return intervals, boot


class CriticalBatchRecord(FitRecord):
    """A FitRecord whose summary shows one line per (model, target) with the noise scale."""

    def summary(self) -> str:
        s = self.get("settings") or {}
        lines = [f"law: critical-batch ({s.get('input', '')})", f"runs/points: {self.get('n_points')}"]
        if s.get("metric"):
            lines.append(
                f"steps to target from '{s['metric']}', smoothing: "
                f"{s.get('smoothing')}; targets: {s['targets']['mode']}"
            )
        ivs = self.get("intervals") or {}
        for k, v in self["params"].items():
            iv = ivs.get(k)
            lines.append(f"  {k:>18} = {v:.6g}" + (f"   [{iv[0]:.6g}, {iv[1]:.6g}]" if iv and None not in iv else ""))
        lines.append(
            f"  {'N':>10} {'target':>8} {'S_min':>9} {'E_min':>10} {'B_crit':>10} "
            f"{'interval':>23} {'B_20%':>9} {'D=2E_min':>10}  noise scale (B_simple)"
        )
        for m in self.get("models") or []:
            iv = m.get("B_crit_interval")
            ivs_ = f"[{iv[0]:.4g}, {iv[1]:.4g}]" if iv else "-"
            t = "-" if m.get("target_loss") is None else f"{m['target_loss']:.4g}"
            if m.get("noise_scale") is not None:
                ns = f"{m['noise_scale']:.4g} (median of {m['noise_scale_runs']} runs)"
            else:
                ns = "not measured" if "noise_scale_note" in m else "-"
            flag = "" if m.get("in_laws", True) else "  (extrapolated; not in laws)"
            lines.append(
                f"  {m['N']:>10.4g} {t:>8} {m['S_min']:>9.4g} {m['E_min']:>10.4g} {m['B_crit']:>10.4g} {ivs_:>23} "
                f"{m['B_overhead20']:>9.4g} {m['D_at_B_crit']:>10.4g}  {ns}{flag}"
            )
        ho = self.get("holdout")
        if ho and ho.get("B_crit_fitted") is not None:
            parts = [
                f"{src}: {ho[f'predicted_from_{src}']:.4g} ({ho[f'rel_error_from_{src}']:+.1%})"
                for src in ("N", "D")
                if f"predicted_from_{src}" in ho
            ]
            lines.append(
                f"holdout (largest model N={ho['model_N']:.4g}): B_crit "
                f"fitted {ho['B_crit_fitted']:.4g}; predicted from "
                + ("; ".join(parts) if parts else "no law (too few other model sizes)")
            )
        elif ho:
            lines.append(f"holdout: {ho.get('note', '')}")
        b = self.get("bootstrap")
        if b:
            lines.append(
                f"bootstrap: {b['n']} resamples, {b['failed']} failed"
                + (f" ({'; '.join(f'{n}x {w}' for w, n in b['failed_reasons'].items())})" if b["failed"] else "")
            )
        for w in self.get("warnings", []):
            lines.append(f"warning: {w}")
        return "\n".join(lines)
