"""`scalelab sweep cancel`: stop a sweep's runs for good, each through what started it.

- Runs of Slurm tasks (queued ones from `<runs_dir>/.sweep/jobs.jsonl`, running ones also from
  the Slurm job their lock records) are cancelled with `scancel` alone. Slurm then sends SIGTERM
  to every process of the task: the trainer checkpoints and exits 3, and the worker does not
  requeue it (only the preemption signal SIGUSR1 requeues). A pid in the lock file of a Slurm run
  is never signalled here: it lives on a compute node, and on the login node the same number may
  be any process.
- Runs of a local or `--executor deepspeed` launch on this machine: SIGTERM to the launcher that
  holds the run's lock (it forwards SIGTERM so its trainers checkpoint and stop), or, when that
  launcher is gone, to the trainer it recorded. A pid is signalled only after proving it is still
  the same process (same host and boot, same start time as recorded in the lock), since pids are
  reused.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

from launch.executors.slurm import SlurmExecutor
from rundir.lock import Holder, holder_if_locked


def _local_target(holder: Holder) -> tuple[int, bool] | None:
    """(pid, is a process group) to SIGTERM for a locally held run, or None if none is provably it."""
    if holder.is_live_here():
        return holder.pid, False
    for proc in holder.trainers:
        if holder.is_live_here(proc):
            return proc.pid, True  # trainers run in their own session: signal the whole group
    return None


def cancel_sweep(plan, names: list[str] | None = None, out=print) -> int:
    """Cancel the planned runs (all, or those in `names`); returns the exit code (0)."""

    runs = [r for r in plan.runs if names is None or r.name in names]
    holders = {r.name: holder_if_locked(r.run_dir) for r in runs}
    have_scancel = shutil.which("scancel") is not None
    scancelled: list[str] = []
    if have_scancel:
        scancelled = SlurmExecutor(plan.spec).cancel([r.name for r in runs] if names is not None else None)
        extra = sorted({h.slurm_job for h in holders.values() if h and h.slurm_job} - set(scancelled))
        if extra:  # running tasks squeue/jobs.jsonl did not name (e.g. another launch's records lost)
            subprocess.run(["scancel", *extra], check=False)
            scancelled += extra
        if scancelled:
            out(
                f"scancel {' '.join(scancelled)}: Slurm sends SIGTERM; "
                "running trainers checkpoint and stop (no requeue)"
            )
    signalled: set[int] = set()
    done_something = bool(scancelled)
    for r in runs:
        h = holders[r.name]
        if h is None:
            continue
        if h.slurm_job:
            if not have_scancel:
                out(f"{r.name}: held by {h.describe()}; run `scancel {h.slurm_job}` where Slurm is available")
            continue
        target = _local_target(h)
        if target is None:
            out(
                f"{r.name}: held by {h.describe()}, which is not a process of this machine that can be verified "
                f"(another host, or the pid now belongs to another process); not signalled"
            )
            continue
        pid, group = target
        if pid in signalled or pid == os.getpid():
            continue
        try:
            os.killpg(pid, signal.SIGTERM) if group else os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        signalled.add(pid)
        done_something = True
        who = "trainer" if group else {"worker": "worker", "deepspeed": "deepspeed launch"}.get(h.role, "launcher")
        out(f"SIGTERM {who} pid {pid} (holds {r.name}); its runs checkpoint and stop")
    if not done_something:
        out("nothing to cancel")
    return 0
