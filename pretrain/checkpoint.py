"""Checkpoints through DeepSpeed, made crash-safe.

A checkpoint is `checkpoints/step_<N>/`; it counts only once `COMPLETE` (holding the client
state) is written inside it after DeepSpeed finished, and `latest` is switched atomically
afterwards. An interrupted save therefore never replaces the last good checkpoint, and a
corrupt one is skipped in favour of the one before it.
"""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import torch

from pretrain.run_dir import atomic_write_text

MARKER = "COMPLETE"


def complete_checkpoints(root: Path) -> list[tuple[int, Path]]:
    out = []
    if root.exists():
        for d in root.iterdir():
            if d.is_dir() and d.name.startswith("step_") and (d / MARKER).exists():
                try:
                    out.append((int(d.name[5:]), d))
                except ValueError:
                    continue
    return sorted(out)


def rng_state() -> dict:
    return {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(engine, root: Path, step: int, client: dict, keep: int, is_main: bool, barrier) -> Path:
    tag = f"step_{step}"
    path = root / tag
    if is_main and path.exists():  # a stale, incomplete attempt at this step
        shutil.rmtree(path)
    barrier()
    engine.save_checkpoint(str(root), tag=tag, client_state={"scalelab": client}, save_latest=False)
    barrier()
    if is_main:
        atomic_write_text(path / MARKER, json.dumps({"step": step}) + "\n")
        atomic_write_text(root / "latest", tag + "\n")
        _prune(root, keep)
    barrier()
    return path


def _prune(root: Path, keep: int) -> None:
    done = complete_checkpoints(root)
    newest = done[-1][0] if done else -1
    for step, d in done[:-keep]:
        shutil.rmtree(d, ignore_errors=True)
    for d in root.iterdir():  # leftovers of interrupted saves older than the newest good one
        if d.is_dir() and d.name.startswith("step_") and not (d / MARKER).exists():
            try:
                if int(d.name[5:]) < newest:
                    shutil.rmtree(d, ignore_errors=True)
            except ValueError:
                pass


def load_latest(engine, root: Path, log) -> dict | None:
    """Load the newest loadable complete checkpoint; returns its client state or None."""
    for step, path in reversed(complete_checkpoints(root)):
        try:
            loaded, client = engine.load_checkpoint(str(root), tag=path.name, load_optimizer_states=True, load_lr_scheduler_states=False)
        except Exception as exc:  # corrupt files: fall back to the previous checkpoint
            log(f"warning: checkpoint {path.name} could not be loaded ({type(exc).__name__}: {exc}); trying an older one")
            continue
        if loaded is None or client is None or "scalelab" not in client:
            log(f"warning: checkpoint {path.name} is incomplete; trying an older one")
            continue
        return client["scalelab"]
    return None
