"""The fit's points: steps to a target per run, read from a table (already steps to its target) or from a
run-directory tree (each finished run's metrics.jsonl curve, first crossing of each model's targets:
scaling.fits.steps_to_target), with the warnings of what was left out and why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rundir.dotted import get_dotted
from rundir.layout import CONFIG, METRICS
from scaling.core.errors import InputError
from scaling.core.selection import group_by_tolerance
from scaling.data import inputs
from scaling.fits import steps_to_target as stt


def table_points(ds) -> tuple[dict, dict]:
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


def run_points(
    ds, target_loss, metric: str, smooth: float | None, warnings: list[str]
) -> tuple[dict, dict, list[dict]]:
    """Steps to target for every finished run of a run-directory tree (see steps_to_target)."""
    root = Path(ds.source)
    runs, curves, cfgs = _read_curves(root, ds.df, metric, smooth, warnings)
    N = np.array([float(r["N"]) for r in runs])
    B = np.array([float(r["batch_tokens"]) for r in runs])
    lr = np.array([float(r["lr"]) if _pos(r.get("lr")) else np.nan for r in runs])
    model = group_by_tolerance(N, 0.01)
    targets_by_model = _targets(N, B, model, curves, target_loss, warnings)
    cols: dict[str, list] = {k: [] for k in ("run", "ridx", "N", "B", "S", "lr", "target", "compute")}
    table: list[dict] = []
    missed: dict[str, list] = {}
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
                cols[k].append(v)
    warnings.extend(_missed_warnings(missed, metric))
    warnings.extend(_schedule_warnings(runs, cfgs, model, N))
    pts: dict = {k: (np.asarray(v, dtype=float) if k not in ("run",) else v) for k, v in cols.items()}
    pts["ridx"] = pts["ridx"].astype(int)
    return pts, _runs_info(target_loss, metric, smooth, N, model, targets_by_model, len(runs)), table


def _read_curves(root: Path, df, metric: str, smooth: float | None, warnings: list[str]) -> tuple[list, list, list]:
    """([run rows], [their smoothed `metric` curves], [their configs]) of the runs with a size, a batch and
    a curve; each other run is a warning that says what it lacks."""
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
    return runs, curves, cfgs


def _targets(N, B, model, curves, target_loss, warnings: list[str]) -> dict[int, list[float]]:
    """Each model group's target losses: the given ones, else chosen from its curves so that every batch
    size reaches them (steps_to_target.auto_targets)."""
    out: dict[int, list[float]] = {}
    for g in np.unique(model):
        idx = np.flatnonzero(model == g)
        if target_loss:
            out[int(g)] = sorted(set(float(t) for t in target_loss))
            continue
        bg = group_by_tolerance(B[idx], 0.01)
        cells = [[curves[i] for i in idx[bg == b]] for b in np.unique(bg)]
        t = stt.auto_targets(cells)
        if not t:
            warnings.append(
                f"model N~{N[idx].mean():.3g}: its curves leave no loss level every "
                "batch size reaches below every run's first record; no automatic target"
            )
        out[int(g)] = t
    return out


def _missed_warnings(missed: dict[str, list], metric: str) -> list[str]:
    """Per run, the targets it never reached and those it was already below at its first record."""
    out = []
    for run, items in missed.items():
        never = [f"{t:.4g}" for t, st, _ in items if st == "never"]
        early = [f"{t:.4g}" for t, st, _ in items if st != "never"]
        best = items[0][2].best
        if never:
            out.append(
                f"run {run}: never reached target loss {', '.join(never)} (best "
                f"smoothed {metric} {best:.4g}); left out of that target's fit"
            )
        if early:
            out.append(
                f"run {run}: {metric} already at or below target {', '.join(early)} at its "
                "first log record (crossing not resolved); left out of that target's fit"
            )
    return out


def _runs_info(target_loss, metric: str, smooth: float | None, N, model, targets_by_model, n_runs: int) -> dict:
    """The record's settings on how steps to target were read from the runs."""
    bw = stt.DEFAULT_SMOOTH[metric] if smooth is None else smooth
    return {
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
        "n_runs_read": n_runs,
    }


def _pos(v) -> bool:
    try:
        return bool(np.isfinite(float(v)) and float(v) > 0)
    except (TypeError, ValueError):
        return False


def _compute(r: dict) -> float:
    """The run's compute: its recorded FLOPs, else 6 N D, else N (a proxy that still orders the models)."""
    candidates: list[Any] = [r.get("flops")] + ([6.0 * float(r["N"]) * float(r["D"])] if _pos(r.get("D")) else [])
    for v in candidates:
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
