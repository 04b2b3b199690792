"""Where each run of a sweep stands: `rundir.read.run_status` plus what only a sweep knows.

A sweep knows which config it plans for each run (a directory holding another one is `stale`)
and which Slurm tasks still wait in the queue (`queued`).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from pretrain.config.loader import validate_train
from pretrain.errors import ConfigError
from rundir import read
from rundir.files import read_yaml
from rundir.layout import CONFIG, LAUNCH_CONFIG
from rundir.read import STATES, RunStatus
from rundir.summary import read_summary


def run_status(
    run_dir: str | Path, name: str | None = None, planned_id: str | None = None, planned_steps: int | None = None
) -> RunStatus:
    """`rundir.read.run_status`, a stale-looking run re-hashed under today's identity rules."""
    return read.run_status(run_dir, name, planned_id, planned_steps, current_id=current_id)


def current_id(run_dir: Path) -> str | None:
    """The id of the config a run directory holds, hashed under today's identity rules.

    Its recorded `run_id` was hashed when it was planned; when the rules change (a key becomes
    bookkeeping) an unchanged run would otherwise look stale. Read only when the ids differ."""
    return current_identity(run_dir)[1]


def current_identity(run_dir: Path) -> tuple[str | None, str | None]:
    """(sweep the directory's run belongs to, `current_id`), from its launch.yaml (else config.yaml).

    launch.yaml is the config as the sweep planned it; config.yaml has values the trainer filled
    in (model.vocab_size from the data), which would hash differently from the plan."""

    from launch.sweep.naming import config_id  # deferred: imports torch

    for name in (LAUNCH_CONFIG, CONFIG):
        try:
            raw = read_yaml(Path(run_dir) / name)
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


def compute_line(plan, statuses: list[RunStatus]) -> str | None:
    """A study whose runs branch (kind wsd): its compute with each shared prefix counted once, what
    separate runs would cost, and what the finished runs computed (summary.json: flops - shared_flops).
    None when no run branches."""

    separate = sum(r.flops for r in plan.runs)
    shared = sum(r.shared_flops for r in plan.runs)
    if not shared:
        return None
    spent = 0.0
    for r, st in zip(plan.runs, statuses):
        if st.state == "done":
            s = read_summary(r.run_dir) or {}
            spent += float(s.get("flops") or 0.0) - float(s.get("shared_flops") or 0.0)
    return (
        f"compute: {separate - shared:.3g} FLOPs with each stable prefix counted once, {separate:.3g} as separate runs "
        f"(saving {shared:.3g}, {100 * shared / separate:.0f}%); finished runs computed {spent:.3g}"
    )
