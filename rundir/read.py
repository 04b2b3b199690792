"""Run directories -> states and table rows: the one reader of the run-directory contract.

    from rundir.read import load_runs
    df, problems = load_runs("runs/isoflop-tiny")

`run_status` says where a run stands in a few syscalls (the tail of metrics.jsonl, summary.json,
the lock probe; config.yaml is never parsed), so 1,000 runs take well under a second.
States: pending (nothing yet), running (its lock is held), done / failed / preempted (from
summary.json), partial (checkpoints but no summary: killed, resumable), stale (the directory
holds a different config than the one planned); a sweep adds queued (a Slurm task waits for it).

`read_run` makes one table row per run: summary.json fields (among them `epochs`, passes over
the training split's unique tokens, and `unique_tokens`), the sweep axes (`axis.<name>`
columns, from `extras.axes`), key model/train config values, and the status. Branches
(`train.init_from`) add `init_from` (the parent's run directory) and `branch_step`, and their
`shared_tokens`/`shared_flops` (the parent's prefix, counted in `flops` but computed once, by the
parent: `computed_flops` subtracts them); a branch still training (no summary.json yet) takes
its lineage from its config's `train.init_from`. `end_point` says whether the run's end is an
(N, D, loss) point of a scaling study: true unless its sweep marked it false (`extras.axes.end_point`:
a run whose end is the intermediate state of a longer schedule). `optim` is the optimizer
(`optim.name`; a config written before that key existed means the schema default, adamw:
`CONFIG_DEFAULTS`, also what `config_value` answers for a missing key). A malformed or
half-written directory becomes an entry in `problems` ({path, problem}) instead of an
exception: one bad run never hides the other 999.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rundir.checkpoints import has_checkpoint
from rundir.dotted import get_dotted, has_dotted
from rundir.files import read_yaml
from rundir.layout import CHECKPOINTS, CONFIG, LAUNCH_CONFIG, MARKERS, METRICS, SKIP_DIRS, checkpoint_step
from rundir.lock import holder_if_locked
from rundir.metrics import last_record
from rundir.summary import SOURCE_PREFIXES, read_summary

if TYPE_CHECKING:
    import pandas as pd

STATES = ("pending", "queued", "running", "partial", "preempted", "failed", "done", "stale")
_RUN_ID = re.compile(r"^\s*run_id:\s*'?([0-9a-f]+)'?\s*$", re.M)
# summary.json keys copied into a row (rundir.summary.RunSummary field names).
SUMMARY_COLUMNS = [
    "steps",
    "total_steps",
    "tokens",
    "params",
    "non_embedding_params",
    "active_params",
    "active_non_embedding_params",
    "flops_per_token",
    "flops",
    "batch_tokens",
    "batch_size",
    "lr",
    "final_loss",
    "final_val_loss",
    "final_val_bpb",
    "tokens_per_s",
    "mfu",
    "wall_s",
    "world_size",
    "finished_at",
    "error",
    "epochs",
    "unique_tokens",
    "peak_lr",
    "shared_tokens",
    "shared_flops",
]
CONFIG_COLUMNS = {
    "model": ("model", "preset"),
    "d_model": ("model", "d_model"),
    "n_layers": ("model", "n_layers"),
    "n_heads": ("model", "n_heads"),
    "seq_len": ("model", "seq_len"),
    "vocab_size": ("model", "vocab_size"),
    "seed": ("train", "seed"),
    "micro_batch_size": ("train", "micro_batch_size"),
    "schedule": ("schedule", "name"),
    "num_experts": ("model", "moe", "num_experts"),
    "top_k": ("model", "moe", "top_k"),
    "optim": ("optim", "name"),
}
# Config keys added to the trainer's schema after runs were written: a resolved config.yaml without
# the key was trained with this value (the schema default), so readers must not call it unknown.
CONFIG_DEFAULTS = {"optim.name": "adamw"}
_MISSING = object()


@dataclass
class RunStatus:
    name: str
    state: str
    step: int | None = None
    total_steps: int | None = None
    loss: float | None = None
    val_loss: float | None = None
    tokens: int | None = None
    wall_s: float | None = None
    epochs: float | None = None  # passes over the training split's unique tokens
    error: str | None = None
    job: str | None = None
    held_by: str | None = None  # while locked: "host pid N" (+ Slurm job) of the launch that holds it
    run_dir: str = ""

    @property
    def progress(self) -> float | None:
        if self.step is None or not self.total_steps:
            return None
        return min(1.0, self.step / self.total_steps)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["progress"] = self.progress
        return d


def run_status(
    run_dir: str | Path,
    name: str | None = None,
    planned_id: str | None = None,
    planned_steps: int | None = None,
    current_id: Callable[[Path], str | None] | None = None,
) -> RunStatus:
    """Where a run stands. With `planned_id` (a sweep's), a directory holding another config is
    `stale`, unless `current_id(run_dir)` (its config re-hashed under today's rules) matches."""
    run_dir = Path(run_dir)
    st = RunStatus(name=name or run_dir.name, state="pending", total_steps=planned_steps, run_dir=str(run_dir))
    if not run_dir.is_dir():
        return st
    summary = read_summary(run_dir)
    rec = last_record(run_dir / METRICS)
    if rec:
        st.step, st.loss, st.tokens = rec.get("step"), rec.get("loss"), rec.get("tokens")
        st.val_loss = rec.get("val_loss")
        st.wall_s = rec.get("wall_s")
        st.epochs = rec.get("epoch")
    if summary:
        st.state = summary.get("status") or "failed"
        st.step = summary.get("steps", st.step)
        st.total_steps = summary.get("total_steps", st.total_steps)
        st.loss = summary.get("final_loss", st.loss)
        st.val_loss = summary.get("final_val_loss", st.val_loss)
        st.tokens = summary.get("tokens", st.tokens)
        st.wall_s = summary.get("wall_s", st.wall_s)
        st.epochs = summary.get("epochs", st.epochs)
        st.error = summary.get("error")
        found_id = (summary.get("extras") or {}).get("run_id")
    else:
        found_id = _config_run_id(run_dir)
        if has_checkpoint(run_dir):
            st.state = "partial"
    if planned_id and found_id and found_id != planned_id and (current_id is None or current_id(run_dir) != planned_id):
        st.state = "stale"
        st.error = f"run dir holds config {found_id}, the spec now plans {planned_id}"
        return st
    if st.state != "done":
        holder = holder_if_locked(run_dir)
        if holder is not None:
            st.state, st.held_by = "running", holder.describe()
    return st


def _config_run_id(run_dir: Path) -> str | None:
    try:
        text = (run_dir / CONFIG).read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    m = _RUN_ID.search(text)
    return m.group(1) if m else None


def find_run_dirs(root: str | Path) -> list[Path]:
    """Every run directory under `root` (any depth), sorted; symlinked folders are not entered."""
    out = []
    for dirpath, dirnames, filenames in os.walk(Path(root)):
        if any(m in filenames for m in MARKERS):
            out.append(Path(dirpath))
            dirnames[:] = []  # a run dir's subfolders are its own (checkpoints, evals)
            continue
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
    return sorted(out)


def read_run(run_dir: Path) -> tuple[dict | None, str | None]:
    """(row, problem). A row may come with a problem (e.g. torn config) when enough is readable."""

    row: dict[str, Any] = {"run": run_dir.name, "path": str(run_dir)}
    problem = None
    try:
        summary = read_summary(run_dir, strict=True)
    except ValueError as exc:
        return None, str(exc)
    cfg = None
    for name in (CONFIG, LAUNCH_CONFIG):
        cp = run_dir / name
        if cp.exists():
            try:
                cfg = read_yaml(cp)
                if not isinstance(cfg, dict):
                    raise ValueError("not a mapping")
            except (yaml.YAMLError, ValueError, UnicodeDecodeError) as exc:
                problem = f"{name} unreadable ({type(exc).__name__})"
                cfg = None
            break
    if summary is None and cfg is None:
        if not (run_dir / METRICS).exists():
            return None, problem or "neither summary.json nor a readable config.yaml"
    extras = (summary or {}).get("extras") or (cfg or {}).get("extras") or {}
    row["sweep"] = extras.get("sweep")
    row["run_id"] = extras.get("run_id")
    st = run_status(run_dir)
    row["status"] = st.state
    if summary:
        for k in SUMMARY_COLUMNS:
            row[k] = summary.get(k)
        for k, v in summary.items():
            if k.startswith(SOURCE_PREFIXES):
                row[k] = v
    else:
        row.update(
            {
                "steps": st.step,
                "total_steps": st.total_steps,
                "tokens": st.tokens,
                "final_loss": st.loss,
                "final_val_loss": st.val_loss,
                "wall_s": st.wall_s,
                "epochs": st.epochs,
            }
        )
        if cfg:
            row["lr"] = get_dotted(cfg, "optim.lr")
            row["batch_size"] = get_dotted(cfg, "train.global_batch_size")
    row["last_loss"] = st.loss
    lineage = (summary or {}).get("init_from") or (None if summary else _config_lineage(cfg)) or {}
    row["init_from"], row["branch_step"] = lineage.get("run"), lineage.get("step")
    if row.get("flops") is not None:
        row["computed_flops"] = row["flops"] - (row.get("shared_flops") or 0.0)
    row["end_point"] = (extras.get("axes") or {}).get("end_point", True) is not False
    if cfg:
        for col, path in CONFIG_COLUMNS.items():
            row[col] = config_value(cfg, ".".join(path))
        row["name"] = cfg.get("name")
    for k, v in (extras.get("axes") or {}).items():
        row[f"axis.{k}"] = v
    return row, problem


def config_value(cfg: dict | None, dotted: str, default: Any = _MISSING) -> Any:
    """The value of a dotted key (`optim.name`) in a resolved config: the key's schema default
    (`CONFIG_DEFAULTS`) when the config predates it, else `default` (None if not given).
    `rundir.dotted.has_dotted` tells a missing key from a null value."""
    if has_dotted(cfg, dotted):
        return get_dotted(cfg, dotted)
    return CONFIG_DEFAULTS.get(dotted, None if default is _MISSING else default)


def _config_lineage(cfg: dict | None) -> dict | None:
    """{run, step} from a config's `train.init_from` (RUN_DIR or RUN_DIR/checkpoints/step_N): a
    branch still training has no summary yet, but its lineage is known from the start."""
    src = get_dotted(cfg, "train.init_from") if cfg else None
    if not src:
        return None
    p = Path(str(src))
    step = checkpoint_step(p.name) if p.parent.name == CHECKPOINTS else None
    return {"run": str(p.parent.parent if step is not None else p), "step": step}


def compute_totals(rows: list[dict]) -> tuple[float, float]:
    """(FLOPs computed, FLOPs as separate runs) of table rows: a branch's shared prefix counts once,
    in its parent."""
    separate = sum(float(r.get("flops") or 0.0) for r in rows if r.get("flops") == r.get("flops"))
    shared = sum(float(r.get("shared_flops") or 0.0) for r in rows if r.get("shared_flops") == r.get("shared_flops"))
    return separate - shared, separate


def load_runs(root: str | Path) -> tuple[pd.DataFrame, list[dict]]:
    """All runs under `root` as a DataFrame (one row per run) plus the problems found."""
    import pandas as pd  # deferred: imports pandas

    root = Path(root)
    rows, problems = [], []
    if not root.exists():
        return pd.DataFrame(columns=["run", "path", "status"]), [{"path": str(root), "problem": "does not exist"}]
    for d in find_run_dirs(root):
        try:
            row, problem = read_run(d)
        except Exception as exc:  # never let one directory stop the scan
            row, problem = None, f"{type(exc).__name__}: {exc}"
        if problem:
            problems.append({"path": str(d), "problem": problem})
        if row is not None:
            rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(columns=["run", "path", "status"])
    return df, problems
