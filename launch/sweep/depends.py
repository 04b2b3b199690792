"""Runs that start after another run's checkpoint: a planned run's `after` = (parent run, step).

A WSD branch (`train.init_from`) can start as soon as its parent's `checkpoints/step_N` is
complete, long before the parent ends. Executors ask here whether a run may start; the parent
lives beside it (`<runs_dir>/<parent>`, how every sweep lays out its runs).
"""

from __future__ import annotations

from pathlib import Path

from rundir.checkpoints import has_checkpoint
from rundir.layout import CHECKPOINTS, COMPLETE, checkpoint_tag


def parent_dir(run) -> Path | None:
    after = getattr(run, "after", None)
    return Path(run.run_dir).parent / after[0] if after else None


def parent_checkpoint(run) -> Path | None:
    """The checkpoint directory a run starts from (None: it depends on nothing)."""
    after = getattr(run, "after", None)
    return parent_dir(run) / CHECKPOINTS / checkpoint_tag(after[1]) if after else None


def may_start(run) -> bool:
    """Whether nothing holds the run back: no parent, the parent's checkpoint is complete, or the
    run has checkpoints of its own (it resumes from them and never reads its parent again)."""
    ckpt = parent_checkpoint(run)
    return ckpt is None or (ckpt / COMPLETE).exists() or has_checkpoint(Path(run.run_dir))


def describe(run) -> str:
    after = getattr(run, "after", None)
    return f"{after[0]} step {after[1]}" if after else ""
