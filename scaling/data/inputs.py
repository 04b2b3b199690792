"""Reading fit inputs: a DataFrame, a CSV/Parquet file, or a tree of scalelab run directories.

Every fit works on one canonical table with the columns
    N (parameters; which kind is recorded), D (tokens), loss,
and optionally flops, batch_tokens, lr, steps, run. Run directories are read by `read_run_dirs`,
through the run registry.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rundir.dotted import get_dotted
from rundir.files import read_yaml
from rundir.layout import CONFIG, METRICS
from rundir.metrics import read_metrics
from rundir.read import load_runs
from scaling.core.errors import InputError
from scaling.data.columns import resolve_columns
from scaling.data.table_files import read_table

ROLES = ("N", "D", "loss", "flops", "batch_tokens", "lr", "steps", "U")

# Column names recognised automatically (case-insensitive) when --col does not say otherwise.
ALIASES: dict[str, tuple[str, ...]] = {
    "N": ("n", "params", "n_params", "parameters", "model size", "model_size"),
    "D": ("d", "tokens", "n_tokens", "training tokens", "train_tokens"),
    "loss": ("loss", "final_val_loss", "val_loss", "final_loss", "eval_loss"),
    "flops": ("flops", "training flop", "training_flop", "c", "compute"),
    "batch_tokens": ("batch_tokens", "batch_size_tokens", "bs_tokens", "b"),
    "lr": ("lr", "learning_rate", "eta"),
    "steps": ("steps", "step", "s", "steps_to_target"),
    "U": (
        "u",
        "unique_tokens",
        "u_d",
        "unique tokens",
        "unique",
    ),  # unique tokens a run could draw from (D / U = epochs)
}

from scaling.core.conventions import N_COLUMNS as N_KINDS  # N kind -> summary.json key  # noqa: E402

# Per-run columns kept next to the roles when present: conventions (parameter counts of every kind,
# the sweep's compute convention and budget), data repetition, and where the run lives.
PASSTHROUGH = (
    "run",
    "sweep",
    "path",
    "params",
    "non_embedding_params",
    "active_params",
    "flops_per_token",
    "unique_tokens",
    "epochs",
    "isoflop_compute",
    "budget",
)


@dataclass
class Dataset:
    """A canonical table plus where it came from and what the reader had to say about it."""

    df: Any  # pandas.DataFrame with canonical column names
    source: str
    n_kind: str  # total | non_embedding | active (what N is)
    columns: dict[str, str] = field(default_factory=dict)  # role -> original column
    warnings: list[str] = field(default_factory=list)
    n_source: str = ""  # where N came from, for the record


def load(source, columns: dict[str, str] | None = None, n_kind: str = "total", curves: bool = False) -> Dataset:
    """Load DATA (DataFrame, .csv/.parquet path, or run-directory tree) into a canonical Dataset.
    `curves=True` (run directories only) gives one row per metrics.jsonl record instead of per run."""
    import pandas as pd  # deferred: pandas is slow to import

    if n_kind not in N_KINDS:
        raise InputError(f"unknown N kind '{n_kind}' (choose from {', '.join(N_KINDS)})")
    n_kind = str(n_kind)
    columns = dict(columns or {})
    warnings: list[str] = []
    if isinstance(source, pd.DataFrame):
        raw, desc = source.copy(), "DataFrame"
    else:
        path = Path(source)
        desc = str(path)
        if not path.exists():
            raise InputError(f"data not found: {path}")
        if curves and not path.is_dir():
            raise InputError(f"{path}: training curves (--curves) need a run-directory tree")
        if path.is_dir():
            raw, warnings = read_curves(path, n_kind=n_kind) if curves else read_run_dirs(path, n_kind=n_kind)
            if not columns:
                mapping = {r: r for r in ROLES if r in raw.columns}
                if "unique_tokens" in raw.columns and raw["unique_tokens"].notna().all():
                    mapping["U"] = "unique_tokens"  # the training split's unique tokens (summary.json)
                return _canonical(raw, mapping, desc, n_kind, warnings, f"{N_KINDS[n_kind]} from summary.json")
        else:
            raw = read_table(path)
    # --n-kind picks the table's column of that kind when it has one (e.g. non_embedding_params)
    preferred = {"N": N_KINDS[n_kind]} if n_kind != "total" else None
    mapping = resolve_columns(raw, columns, ROLES, ALIASES, preferred)
    source_n = f"column '{mapping['N']}'" + (" (--col)" if "N" in columns else "") if "N" in mapping else ""
    return _canonical(raw, mapping, desc, n_kind, warnings, source_n)


def _canonical(
    raw, mapping: dict[str, str], desc: str, n_kind: str, warnings: list[str], n_source: str = ""
) -> Dataset:
    import pandas as pd  # deferred: pandas is slow to import

    df = pd.DataFrame(index=raw.index)
    for role, col in mapping.items():
        df[role] = pd.to_numeric(raw[col], errors="coerce")
        bad = raw[col].notna() & df[role].isna()
        if bad.any():
            raise InputError(f"column '{col}' ({role}) has non-numeric values, e.g. {raw[col][bad].iloc[0]!r}")
    lower = {str(c).strip().lower(): c for c in raw.columns}
    for extra in PASSTHROUGH:
        extra_col = lower.get(extra)
        if extra_col is None or extra in df.columns:
            continue
        df[extra] = (
            raw[extra_col].astype(str)
            if extra in ("run", "sweep", "path", "isoflop_compute")
            else pd.to_numeric(raw[extra_col], errors="coerce")
        )
    if "D" not in df.columns and "flops" in df.columns and "N" in df.columns:
        df["D"] = df["flops"] / (6.0 * df["N"])
        mapping = dict(mapping, D="flops/(6N)")
    df = df.reset_index(drop=True)
    return Dataset(
        df=df,
        source=desc,
        n_kind=n_kind,
        columns={k: str(v) for k, v in mapping.items()},
        warnings=list(warnings),
        n_source=n_source,
    )


def validate(ds: Dataset, roles: Iterable[str], *, min_points: int, law: str) -> None:
    """Check required columns exist, are finite and positive, and that there are enough rows.
    Error messages name the column (as the user called it) and the offending rows."""
    df = ds.df
    missing = [r for r in roles if r not in df.columns]
    if missing:
        hint = " (or 'flops' together with N)" if "D" in missing else ""
        hint += " (unique tokens per run: a column U, unique_tokens or u_d)" if "U" in missing else ""
        avail = ", ".join(ds.columns.get(c, c) for c in df.columns) or "(none)"
        which = ", ".join(f"'{r}'" for r in missing)
        raise InputError(f"{law}: missing column for {which}{hint}; map one with --col ROLE=COLUMN (found: {avail})")
    for role in roles:
        name = ds.columns.get(role, role)
        vals = df[role].to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(vals))
        if bad.size:
            raise InputError(
                f"{law}: column '{name}' ({role}) has {bad.size} NaN/infinite value(s), first at row {int(bad[0])}"
            )
        bad = np.flatnonzero(vals <= 0)
        if bad.size:
            raise InputError(
                f"{law}: column '{name}' ({role}) has {bad.size} non-positive "
                f"value(s), first at row {int(bad[0])} ({vals[bad[0]]:g})"
            )
    if len(df) < min_points:
        raise InputError(f"{law}: too few points: {len(df)} (need at least {min_points})")


# ---------------------------------------------------------------- run directories
def _read_yaml(path: Path) -> dict:
    data = read_yaml(path)
    return data if isinstance(data, dict) else {}


def read_run_dirs(root: str | Path, n_kind: str = "total"):
    """Finished runs under `root` as a canonical table plus warnings: (DataFrame, warnings).

    The run directories are read by the run registry (`rundir.read.load_runs`), the one reader of
    the run-directory contract. Only runs with status "done"; loss = final_val_loss if present else
    final_loss; N = summary[N_KINDS[n_kind]]; D = tokens; broken runs become warnings, never exceptions.
    A branch (train.init_from, e.g. a WSD cooldown) is a point at its own D (tokens from step 0) and
    carries `branch_of` and `shared_flops`; a run whose end is not a study point
    (`end_point` false in the registry) is skipped and counted in the warnings.
    """
    import pandas as pd  # deferred: pandas is slow to import

    root = Path(root)
    table, problems = load_runs(root)
    warnings = [f"run {os.path.relpath(p['path'], root)}: {p['problem']}" for p in problems]
    rows: list[dict] = []
    skipped: dict[str, int] = {}
    for rec in table.to_dict("records"):
        rel = os.path.relpath(rec.get("path", rec.get("run", "?")), root)
        status = rec.get("status")
        if status != "done":
            key = f"status {status!r}"
            skipped[key] = skipped.get(key, 0) + 1
            continue
        if rec.get("end_point") is not None and rec.get("end_point") == False:  # noqa: E712 (numpy bools too)
            # its end is the intermediate state of a longer schedule, not a point
            key = "an end that is not a study point (axes.end_point: false)"
            skipped[key] = skipped.get(key, 0) + 1
            continue
        axes = {
            k.removeprefix("axis."): v for k, v in rec.items() if k.startswith("axis.") and v == v and v is not None
        }
        row, why = _run_row(rel, rec.get("sweep") or Path(rel).parent.name, rec.get("path"), rec, axes, N_KINDS[n_kind])
        if row is None:
            warnings.append(f"run {rel}: {why}")
        else:
            rows.append(row)
    for why, n in sorted(skipped.items()):
        warnings.append(f"skipped {n} run(s) with {why}")
    if not rows:
        raise InputError(
            f"{root}: no finished runs (status 'done' with N, tokens and loss) found"
            + (f"; {'; '.join(warnings)}" if warnings else "")
        )
    df = pd.DataFrame(rows)
    for col in ("N", "D", "loss", "flops", "batch_tokens", "lr", "steps"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df, warnings


def _num(v):
    """A finite float or None (registry tables hold None/NaN for absent fields)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) else None


def _run_row(rel: str, sweep: str, path: str | None, summary: dict, axes: dict, n_key: str):
    """One canonical row from a finished run's summary fields and sweep axes, or (None, why)."""
    loss = _num(summary.get("final_val_loss"))
    if loss is None:
        loss = _num(summary.get("final_loss"))
    N, D = _num(summary.get(n_key)), _num(summary.get("tokens"))
    missing = [k for k, v in ((f"N ({n_key})", N), ("tokens", D), ("final_val_loss/final_loss", loss)) if v is None]
    if missing:
        return None, f"summary.json lacks {', '.join(missing)}; skipped"
    bt, lr = _num(summary.get("batch_tokens")), _num(summary.get("lr"))
    cfg: dict = {}
    if (bt is None or lr is None) and path and (Path(path) / CONFIG).exists():
        try:  # older summaries: take lr and batch from the resolved config
            cfg = _read_yaml(Path(path) / CONFIG)
        except Exception:
            cfg = {}
    lr = lr if lr is not None else _num(get_dotted(cfg, "optim.lr"))
    seq, gbs = _num(get_dotted(cfg, "model.seq_len")), _num(get_dotted(cfg, "train.global_batch_size"))
    if bt is None and seq and gbs:
        bt = seq * gbs
    row = {
        "run": rel,
        "sweep": sweep,
        "path": path,
        "N": N,
        "D": D,
        "loss": loss,
        "flops": _num(summary.get("flops")),
        "batch_tokens": bt,
        "lr": lr,
        "steps": _num(summary.get("steps")),
        "wall_s": _num(summary.get("wall_s")),
    }
    for k in ("params", "non_embedding_params", "active_params", "flops_per_token", "unique_tokens", "epochs"):
        row[k] = _num(summary.get(k))
    row["isoflop_compute"] = axes.get("compute")
    row["budget"] = _num(axes.get("budget"))
    # branches (train.init_from): the parent and the prefix FLOPs `flops` includes but the parent computed
    init = summary.get("init_from")  # the registry's column: the parent's run directory
    row["branch_of"] = init.get("run") if isinstance(init, dict) else (init if isinstance(init, str) else None)
    row["shared_flops"] = _num(summary.get("shared_flops")) or 0.0
    return row, None


def read_curves(root: str | Path, n_kind: str = "total", metric: str = "loss", skip_fraction: float = 0.1):
    """Training curves of finished runs: one row per metrics.jsonl record (run, N, D=tokens so far,
    loss=`metric`), for Chinchilla Approach 1's lower envelope. The first `skip_fraction` of each
    curve (warmup, far from the envelope) is dropped. Returns (DataFrame, warnings).

    A curve stands for finished runs only when its lr decays over the whole run (cosine, linear).
    A WSD or constant-lr run is at peak lr until its own cooldown, and a branch's logged steps are
    its cooldown: their intermediate losses are not what a run of that length reaches, so such
    runs give their end (after their cooldown) only, and a warning counts them."""
    import pandas as pd  # deferred: pandas is slow to import

    final, warnings = read_run_dirs(root, n_kind)
    root = Path(root)
    rows, ends_only = [], []
    for r in final.to_dict("records"):
        path = root / r["run"] / METRICS
        if not _decays_whole_run(r):
            ends_only.append(r["run"])
            rows.append({"run": r["run"], "N": r["N"], "D": r["D"], "loss": r["loss"]})
            continue
        if not path.exists():
            warnings.append(f"run {r['run']}: no metrics.jsonl; using its final point only")
            rows.append({"run": r["run"], "N": r["N"], "D": r["D"], "loss": r["loss"]})
            continue
        recs = []
        for rec in read_metrics(path):  # a torn line from a killed writer is dropped
            t, v = _num(rec.get("tokens")), _num(rec.get(metric))
            if t and v and t > 0 and v > 0:
                recs.append((t, v))
        recs = recs[int(len(recs) * skip_fraction) :]
        if not recs:
            warnings.append(f"run {r['run']}: metrics.jsonl has no '{metric}' with tokens; using its final point only")
            recs = [(r["D"], r["loss"])]
        rows.extend({"run": r["run"], "N": r["N"], "D": t, "loss": v} for t, v in recs)
    if ends_only:
        warnings.append(
            f"{len(ends_only)} run(s) with a WSD or constant lr, or "
            f"branched from another run ({', '.join(ends_only[:4])}"
            f"{', ...' if len(ends_only) > 4 else ''}): their curves before the cooldown are at peak lr, not finished "
            "runs; each gives its end point only"
        )
    return pd.DataFrame(rows), warnings


def _decays_whole_run(row: dict) -> bool:
    """True when the run's lr decays over all its steps (cosine or linear, not a branch), so every
    point of its curve is on the way to a finished run's loss."""
    if isinstance(row.get("branch_of"), str) and row["branch_of"]:  # absent: None or NaN in the table
        return False
    path = row.get("path")
    if not path or not (Path(path) / CONFIG).exists():
        return True
    try:
        cfg = _read_yaml(Path(path) / CONFIG)
    except Exception:
        return True
    return get_dotted(cfg, "schedule.name") not in ("wsd", "constant") and not get_dotted(cfg, "train.init_from")
