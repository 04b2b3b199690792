"""Where each run stands, read from its run directory (the source of truth) in a few syscalls.

States: pending (nothing yet), queued (a Slurm task waits for it), running (its lock is held),
done / failed / preempted (from summary.json), partial (checkpoints but no summary: killed,
resumable), stale (the directory holds a different config than the spec now plans).
Only the tail of metrics.jsonl is read and config.yaml is never parsed, so 1,000 runs take well
under a second.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from launch.locks import holder_if_locked

STATES = ("pending", "queued", "running", "partial", "preempted", "failed", "done", "stale")
_RUN_ID = re.compile(r"^\s*run_id:\s*'?([0-9a-f]+)'?\s*$", re.M)


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


def last_record(path: Path, chunk: int = 8192) -> dict | None:
    """The last complete JSON line of metrics.jsonl (a torn last line is skipped)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - chunk))
            data = f.read()
    except (FileNotFoundError, IsADirectoryError):
        return None
    for line in reversed(data.splitlines()):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(rec, dict):
            return rec
    return None


def has_checkpoint(run_dir: Path) -> bool:
    ck = run_dir / "checkpoints"
    try:
        return any(e.name.startswith("step_") and (Path(e.path) / "COMPLETE").exists() for e in os.scandir(ck))
    except (FileNotFoundError, NotADirectoryError):
        return False


def run_status(run_dir: str | Path, name: str | None = None, planned_id: str | None = None,
               planned_steps: int | None = None) -> RunStatus:
    run_dir = Path(run_dir)
    st = RunStatus(name=name or run_dir.name, state="pending", total_steps=planned_steps, run_dir=str(run_dir))
    if not run_dir.is_dir():
        return st
    summary = None
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
        if not isinstance(summary, dict):
            summary = None
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        summary = None
    rec = last_record(run_dir / "metrics.jsonl")
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
    if planned_id and found_id and found_id != planned_id and current_id(run_dir) != planned_id:
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
        text = (run_dir / "config.yaml").read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    m = _RUN_ID.search(text)
    return m.group(1) if m else None


def current_id(run_dir: Path) -> str | None:
    """The id of the config a run directory holds, hashed under today's identity rules.

    Its recorded `run_id` was hashed when it was planned; when the rules change (a key becomes
    bookkeeping) an unchanged run would otherwise look stale. Read only when the ids differ."""
    return current_identity(run_dir)[1]


def current_identity(run_dir: Path) -> tuple[str | None, str | None]:
    """(sweep the directory's run belongs to, `current_id`), from its launch.yaml (else config.yaml).

    launch.yaml is the config as the sweep planned it; config.yaml has values the trainer filled
    in (model.vocab_size from the data), which would hash differently from the plan."""
    import yaml

    from launch.naming import config_id
    from pretrain.config.loader import validate_train
    from pretrain.errors import ConfigError

    for name in ("launch.yaml", "config.yaml"):
        try:
            raw = yaml.load((Path(run_dir) / name).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            if not isinstance(raw, dict):
                return None, None
            return (raw.get("extras") or {}).get("sweep"), config_id(validate_train(raw))
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError, yaml.YAMLError, ConfigError):
            return None, None
    return None, None


def sweep_status(plan, queued: dict[str, str] | None = None) -> list[RunStatus]:
    """Status of every planned run; `queued` maps run name -> Slurm job id still in the queue."""
    out = []
    for r in plan.runs:
        st = run_status(r.run_dir, r.name, r.id, r.steps)
        if queued and r.name in queued:
            st.job = queued[r.name]
            if st.state in ("pending", "partial", "preempted"):
                st.state = "queued"
        out.append(st)
    return out


def counts(statuses: list[RunStatus]) -> dict[str, int]:
    c = {s: 0 for s in STATES}
    for st in statuses:
        c[st.state] = c.get(st.state, 0) + 1
    return {k: v for k, v in c.items() if v}
