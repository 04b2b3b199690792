"""The checkpoints' manifest: which `checkpoints/step_<N>/` count, and which one a path means.

A checkpoint counts only once its `COMPLETE` marker exists (the trainer writes it after every
rank's files are on disk), and `latest` names the newest complete one. Nothing here reads the
weights (that is `rundir.weights`, with torch).
"""

from __future__ import annotations

import os
from pathlib import Path

from base.errors import UserError
from rundir.layout import CHECKPOINTS, COMPLETE, CONFIG, checkpoint_step


class CheckpointError(UserError, RuntimeError):
    """A run directory or checkpoint that cannot be loaded; the message says why and what to do."""


def complete_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """(step, path) of every complete `step_<N>` under a checkpoints folder, oldest first."""
    out = []
    root = Path(root)
    if root.exists():
        for d in root.iterdir():
            step = checkpoint_step(d.name)
            if step is not None and d.is_dir() and (d / COMPLETE).exists():
                out.append((step, d))
    return sorted(out)


def has_checkpoint(run_dir: Path) -> bool:
    """Whether a run directory holds at least one complete checkpoint (one scandir, no sorting)."""
    try:
        return any(
            checkpoint_step(e.name) is not None and (Path(e.path) / COMPLETE).exists()
            for e in os.scandir(Path(run_dir) / CHECKPOINTS)
        )
    except (FileNotFoundError, NotADirectoryError):
        return False


def resolve_checkpoint(path: str | Path) -> tuple[Path, Path, int]:
    """(run_dir, checkpoint_dir, step) for a run directory (its newest complete checkpoint) or a
    `checkpoints/step_N` directory."""
    p = Path(path).resolve()
    if not p.exists():
        raise CheckpointError(f"{path}: no such run directory or checkpoint")
    if p.name.startswith("step_") and p.parent.name == CHECKPOINTS:
        if not (p / COMPLETE).exists():
            raise CheckpointError(f"{p}: checkpoint is incomplete (no {COMPLETE} file); use an older one")
        step = checkpoint_step(p.name)
        if step is None:
            raise CheckpointError(f"{p}: not a checkpoint directory (expected step_<N>)")
        return p.parent.parent, p, step
    if (p / CONFIG).exists():
        done = complete_checkpoints(p / CHECKPOINTS)
        if not done:
            raise CheckpointError(f"{p}: run directory has no complete checkpoint under {CHECKPOINTS}/")
        step, ckpt = done[-1]
        return p, ckpt, step
    raise CheckpointError(f"{path}: neither a run directory ({CONFIG}) nor a {CHECKPOINTS}/step_N directory")
