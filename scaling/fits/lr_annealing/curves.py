"""Loss curves for the annealing law: a table (run, step, lr, loss) or run directories.

Each curve is the lr of every update (`lr[k]` = lr of update k + 1) and its loss observations,
each the mean of the law over updates lo..hi (lo = hi: a point; a window: a logged training
loss, which the trainer averages over its log window).
- Table: a row (step s, lr, loss) gives the lr of update s and the loss after s updates (a point,
  lo = hi = s). Steps count from 1. lr may be given on every step or on some steps only (then
  linearly interpolated between them, held flat beyond the ends); loss may be empty.
- Run directories: lr of every update from the run's config schedule (`rundir.schedules.lr_at`,
  with total steps and peak lr from summary.json), checked against the lr metrics.jsonl logged;
  loss from metrics.jsonl: `loss` (the trainer's mean over the updates since the previous record:
  a window lo = previous record's step .. hi = step - 1) or `val_loss` (a point at the step).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import yaml

from rundir.layout import CONFIG, METRICS, SUMMARY
from rundir.schedules import lr_at
from scaling.core.errors import InputError
from scaling.data import table_files
from scaling.data.inputs import read_run_dirs

TABLE_ROLES = ("run", "step", "lr", "loss")
SCHEDULE_FIELDS = ("name", "warmup_steps", "warmup_fraction", "min_lr_ratio", "decay_fraction", "decay_shape")


@dataclass
class Curve:
    """One run: lr of updates 1..T and observations (lo, hi, loss): loss ~ mean of L(s), s = lo..hi."""

    name: str
    lr: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    loss: np.ndarray
    lr_source: str
    info: dict = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return int(self.lr.size)

    def subset(self, keep: np.ndarray) -> Curve:
        return Curve(self.name, self.lr, self.lo[keep], self.hi[keep], self.loss[keep], self.lr_source, self.info)


# ---------------------------------------------------------------- tables
def read_table(source, columns: dict[str, str] | None = None) -> tuple[list[Curve], list[str], str]:
    """Curves from a DataFrame or CSV/Parquet file with columns run, step, lr, loss (`columns` maps
    other names). Returns (curves, warnings, description)."""
    import pandas as pd  # deferred: pandas is slow to import

    if isinstance(source, pd.DataFrame):
        raw, desc = source, "DataFrame"
    else:
        raw, desc = table_files.read_table(source), str(source)
    cols = dict(columns or {})
    lower = {str(c).strip().lower(): c for c in raw.columns}
    for role in TABLE_ROLES:
        if role in cols:
            if cols[role] not in raw.columns:
                raise InputError(
                    f"--col {role}={cols[role]}: no column '{cols[role]}' (columns: {', '.join(map(str, raw.columns))})"
                )
        elif role in lower:
            cols[role] = lower[role]
    missing = [r for r in ("step", "lr", "loss") if r not in cols]
    if missing:
        raise InputError(
            f"lr-annealing: missing column(s) {', '.join(repr(m) for m in missing)}; "
            "the table needs run, step, lr, loss "
            f"(map others with --col ROLE=COLUMN; found: {', '.join(map(str, raw.columns))})"
        )
    num = {}
    for role in ("step", "lr", "loss"):
        v = pd.to_numeric(raw[cols[role]], errors="coerce")
        bad = raw[cols[role]].notna() & v.isna()
        if bad.any():
            raise InputError(
                f"lr-annealing: column '{cols[role]}' ({role}) has "
                f"non-numeric values, e.g. {raw[cols[role]][bad].iloc[0]!r}"
            )
        num[role] = v.to_numpy(float)
    step = num["step"]
    if not np.all(np.isfinite(step)):
        raise InputError(
            f"lr-annealing: column '{cols['step']}' (step) has empty values, "
            f"first at row {int(np.flatnonzero(~np.isfinite(step))[0])}"
        )
    if np.any(step != np.round(step)) or np.any(step < 1):
        row = int(np.flatnonzero((step != np.round(step)) | (step < 1))[0])
        raise InputError(
            f"lr-annealing: column '{cols['step']}' (step) must hold whole numbers >= 1 (updates done; add 1 to "
            f"0-based steps), row {row} has {step[row]:g}"
        )
    for role, ok in (("lr", lambda x: x >= 0), ("loss", lambda x: x > 0)):
        v = num[role]
        bad = np.isfinite(v) & ~ok(v) | np.isinf(v)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"lr-annealing: column '{cols[role]}' ({role}) must "
                f"be {'>= 0' if role == 'lr' else '> 0'} where given, "
                f"row {row} has {v[row]:g}"
            )
    runs = raw[cols["run"]].astype(str).to_numpy() if "run" in cols else np.full(len(raw), "run")
    curves, warnings = [], []
    for name in dict.fromkeys(runs):  # order of first appearance
        m = runs == name
        curves.append(_table_curve(name, step[m].astype(int), num["lr"][m], num["loss"][m], cols))
    if "run" not in cols:
        warnings.append("no 'run' column: all rows are one curve")
    return curves, warnings, desc


def _table_curve(name: str, step: np.ndarray, lr: np.ndarray, loss: np.ndarray, cols: dict) -> Curve:
    T = int(step.max())
    has = np.isfinite(lr)
    if not has.any():
        raise InputError(f"lr-annealing: run '{name}' has no value in column '{cols['lr']}' (lr)")
    s, v = step[has], lr[has]
    order = np.argsort(s, kind="stable")
    s, v = s[order], v[order]
    dup = np.flatnonzero(np.diff(s) == 0)
    if dup.size and np.any(v[dup] != v[dup + 1]):
        raise InputError(
            f"lr-annealing: run '{name}' gives two different lrs for step {int(s[dup[0]])} (column '{cols['lr']}')"
        )
    s, idx = np.unique(s, return_index=True)
    v = v[idx]
    lr_all = np.interp(np.arange(1, T + 1), s, v)
    source = "every step" if s.size == T else f"linearly interpolated between {s.size} of {T} steps"
    obs = np.isfinite(loss)
    st = step[obs]
    return Curve(name, lr_all, st.copy(), st.copy(), loss[obs], source, {"final_step": T})


# ---------------------------------------------------------------- run directories
def read_runs(root, metric: str = "loss") -> tuple[list[Curve], list[str], str]:
    """Curves of the finished runs under `root` (see the module docstring). Broken runs become
    warnings; none usable is an InputError."""
    root = Path(root)
    table, warnings = read_run_dirs(root)
    curves = []
    for rec in sorted(table.to_dict("records"), key=lambda r: str(r["run"])):
        path = Path(rec.get("path") or root / rec["run"])
        name = os.path.relpath(path, root) if path != root else path.name
        try:
            curves.append(_run_curve(path, name, metric, warnings))
        except _Skip as exc:
            warnings.append(f"run {name}: {exc}; skipped")
    if not curves:
        raise InputError(
            f"{root}: no finished run with a schedule in config.yaml and '{metric}' in metrics.jsonl"
            + (f"; {'; '.join(warnings)}" if warnings else "")
        )
    return curves, warnings, str(root)


class _Skip(Exception):
    pass


def _run_curve(path: Path, name: str, metric: str, warnings: list[str]) -> Curve:
    try:
        cfg = yaml.safe_load((path / CONFIG).read_text()) or {}
        summary = json.loads((path / SUMMARY).read_text())
    except (OSError, ValueError) as exc:
        raise _Skip(f"cannot read config.yaml / summary.json ({exc})") from None
    sched = cfg.get("schedule") or {}
    lacking = [f for f in SCHEDULE_FIELDS if f not in sched]
    if lacking:
        raise _Skip(f"config.yaml lacks schedule.{', schedule.'.join(lacking)}")
    total = summary.get("total_steps") or summary.get("steps")
    peak = summary.get("peak_lr") or _peak_from_config(cfg)
    if not total or not peak:
        raise _Skip("summary.json lacks total_steps / peak_lr (and config.yaml optim.lr)")
    total, peak = int(total), float(peak)
    sch = SimpleNamespace(**{k: sched[k] for k in SCHEDULE_FIELDS})
    lr = np.array([lr_at(k, total, peak, sch) for k in range(total)], dtype=float)
    recs = _metrics(path / METRICS)
    steps = sorted(recs)
    logged = [(s, recs[s]["lr"]) for s in steps if isinstance(recs[s].get("lr"), (int, float)) and 1 <= s <= total]
    off = [(s, v) for s, v in logged if not np.isclose(v, lr[s - 1], rtol=1e-6, atol=1e-12)]
    if off:
        s, v = off[0]
        warnings.append(
            f"run {name}: metrics.jsonl's lr differs from the config's schedule at {len(off)} of {len(logged)} records "
            f"(step {s}: logged {v:.6g}, schedule {lr[s - 1]:.6g}); the schedule is used"
        )
    lo, hi, loss = [], [], []
    prev = 0
    for s in steps:
        v = recs[s].get(metric)
        if metric == "loss":
            if isinstance(v, (int, float)) and np.isfinite(v) and v > 0 and s <= total:
                lo.append(prev)
                hi.append(s - 1)
                loss.append(float(v))
            prev = s
        elif isinstance(v, (int, float)) and np.isfinite(v) and v > 0 and s <= total:
            lo.append(s)
            hi.append(s)
            loss.append(float(v))
    if not loss:
        raise _Skip(f"metrics.jsonl has no '{metric}' records")
    info = {
        "path": str(path),
        "final_step": total,
        "peak_lr": peak,
        "schedule": {k: sched[k] for k in SCHEDULE_FIELDS},
        "batch_tokens": summary.get("batch_tokens"),
        "params": summary.get("params"),
        "final_loss": summary.get("final_loss"),
        "final_val_loss": summary.get("final_val_loss"),
    }
    return Curve(
        name,
        lr,
        np.array(lo, dtype=int),
        np.array(hi, dtype=int),
        np.array(loss),
        "config schedule (rundir.schedules.lr_at)",
        info,
    )


def _peak_from_config(cfg: dict) -> float | None:
    optim, model = cfg.get("optim") or {}, cfg.get("model") or {}
    lr, ref = optim.get("lr"), optim.get("width_lr_ref")
    if lr is None:
        return None
    return float(lr) * ref / model["d_model"] if ref and model.get("d_model") else float(lr)


def _metrics(path: Path) -> dict[int, dict]:
    """metrics.jsonl records by step (a step logged twice, e.g. after a resume, keeps its last record;
    torn lines from a killed writer are skipped)."""
    out: dict[int, dict] = {}
    if not path.exists():
        raise _Skip("no metrics.jsonl")
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        s = rec.get("step")
        if isinstance(s, int) and s >= 1:
            out[s] = rec
    return out


def load_curves(
    data, *, metric: str = "loss", columns: dict[str, str] | None = None
) -> tuple[list[Curve], list[str], str, str]:
    """Curves from a run-directory tree or a table. Returns (curves, warnings, source, kind)."""
    import pandas as pd  # deferred: pandas is slow to import

    if metric not in ("loss", "val_loss"):
        raise InputError(f"--metric must be loss or val_loss (got {metric!r})")
    if not isinstance(data, pd.DataFrame):
        p = Path(data)
        if not p.exists():
            raise InputError(f"data not found: {p}")
        if p.is_dir():
            if columns:
                raise InputError("--col applies to tables, not run directories")
            return (*read_runs(p, metric), "runs")
    if metric != "loss":
        raise InputError("--metric applies to run directories; a table's loss column is mapped with --col loss=COLUMN")
    return (*read_table(data, columns), "table")
