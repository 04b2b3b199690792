"""Checkpoints through DeepSpeed, made crash-safe.

A checkpoint is `checkpoints/step_<N>/`; it counts only once `COMPLETE` (holding the client
state) is written inside it after DeepSpeed finished, and `latest` is switched atomically
afterwards. An interrupted save therefore never replaces the last good checkpoint, and a
corrupt one is skipped in favour of the one before it. When complete checkpoints exist and none
of them loads, resume stops with `CheckpointLoadError` (naming each checkpoint and why) instead
of silently starting over: nothing in the run directory is deleted.

ZeRO >= 1 (and bf16) partition the optimizer state over the data-parallel ranks, so such a
checkpoint loads only on the world size that wrote it. Resuming on another world size converts
it once with DeepSpeed's universal checkpoint tool (`deepspeed.checkpoint.ds_to_universal`) into
`checkpoints/universal/step_<N>/` and loads that (DeepSpeed's `checkpoint.load_universal`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from pretrain.errors import TrainingFailed
from rundir.checkpoints import complete_checkpoints
from rundir.files import atomic_write_text
from rundir.layout import COMPLETE, LATEST, UNIVERSAL, checkpoint_step, checkpoint_tag


class CheckpointLoadError(RuntimeError):
    """Complete checkpoints exist but none could be loaded; the message names each and why."""


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


class CheckpointSaveError(TrainingFailed):
    """A checkpoint could not be written (disk full, quota, I/O error); the partial write is removed."""


def save(
    engine,
    root: Path,
    step: int,
    client: dict,
    keep: int,
    is_main: bool,
    barrier,
    world_size: int = 1,
    agree: Callable[[bool], bool] = lambda ok: ok,
    pinned=(),
) -> Path:
    """Write `step_<N>` and mark it complete. `agree(ok)` is True only when every rank's `ok` is
    (an all-reduce): a rank whose write failed must not leave the others waiting in a barrier.
    Checkpoints of the steps in `pinned` (train.checkpoint_at_steps) are never pruned."""
    tag = checkpoint_tag(step)
    path = root / tag
    if is_main and path.exists():  # a stale, incomplete attempt at this step
        shutil.rmtree(path)
    barrier()
    error = None
    try:
        engine.save_checkpoint(str(root), tag=tag, client_state={"scalelab": client}, save_latest=False)
    except Exception as exc:  # torch.save reports a full disk as RuntimeError or OSError
        error = exc
    delay = float(os.environ.get("SCALELAB_FAULT_CHECKPOINT_DELAY_S", "0"))  # test hook: hold the write open
    if delay > 0:
        time.sleep(delay)
    if agree(error is None) and is_main:
        try:
            atomic_write_text(path / COMPLETE, json.dumps({"step": step, "world_size": world_size}) + "\n")
            atomic_write_text(root / LATEST, tag + "\n")
        except OSError as exc:
            error = exc
            (path / COMPLETE).unlink(missing_ok=True)
    if not agree(error is None):
        if is_main:  # an incomplete checkpoint never counts; removing it gives the space back
            shutil.rmtree(path, ignore_errors=True)
        done = complete_checkpoints(root)
        free = shutil.disk_usage(root).free / 2**20
        why = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}" if error else "another rank's write failed"
        raise CheckpointSaveError(
            f"checkpoint step_{step} could not be written ({why}; {free:.0f} MiB free on its file system: is the disk "
            f"full?). The partial write was removed; the last good checkpoint "
            f"{done[-1][1].name if done else '(none)'} is kept in "
            f"{root}. Free space and rerun the same command to resume"
        )
    if is_main:
        _prune(root, keep, set(pinned))
    barrier()
    return path


def _prune(root: Path, keep: int, pinned: set[int] = frozenset()) -> None:
    done = complete_checkpoints(root)
    newest = done[-1][0] if done else -1
    for step, d in done[:-keep]:
        if step not in pinned:  # branch points: other runs start from them (train.init_from)
            shutil.rmtree(d, ignore_errors=True)
    for d in root.iterdir():  # leftovers of interrupted saves older than the newest good one
        step = checkpoint_step(d.name)
        if step is not None and step < newest and d.is_dir() and not (d / COMPLETE).exists():
            shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(root / UNIVERSAL, ignore_errors=True)  # conversions are derived data, needed until a save


def weights_finite(model: torch.nn.Module) -> bool:
    """Every parameter and floating buffer finite on this rank (ZeRO-3: this rank's partitions).

    Checked before a save, so that a checkpoint with inf/NaN weights is never marked complete."""
    for p in model.parameters():
        t = getattr(p, "ds_tensor", None)
        t = p.data if t is None else t
        if t.numel() and not bool(torch.isfinite(t).all()):
            return False
    return all(bool(torch.isfinite(b).all()) for b in model.buffers() if b.is_floating_point() and b.numel())


def saved_world_size(path: Path) -> int | None:
    """Data-parallel ranks whose partitioned optimizer state the checkpoint holds (None: not partitioned)."""
    shards = list(path.glob("*zero_pp_rank_*_optim_states.pt"))
    if shards:
        return len(shards)
    return None


def convert_to_universal(path: Path, out: Path | None = None) -> Path:
    """DeepSpeed's ds_to_universal for one checkpoint; returns `out`, by default
    `checkpoints/universal/step_<N>` beside it (a branch converts its parent's checkpoint into its
    own folder instead: the parent's next save prunes its own conversions).

    Done once by rank 0 (a COMPLETE marker guards against a conversion cut short); DeepSpeed's
    console output goes to `.<name>.convert.log` beside the conversion."""
    from deepspeed.checkpoint.ds_to_universal import main as ds_to_universal  # deferred: imports deepspeed

    out = out or path.parent / UNIVERSAL / path.name
    if (out / COMPLETE).exists():
        return out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    args = SimpleNamespace(
        input_folder=str(path),
        output_folder=str(out),
        num_extract_workers=1,
        num_merge_workers=1,
        keep_temp_folder=False,
        strict=True,
        inject_missing_state=True,
    )
    try:
        with (
            open(out.parent / f".{out.name}.convert.log", "w") as log,
            contextlib.redirect_stdout(log),
            contextlib.redirect_stderr(log),
        ):
            ds_to_universal(args)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # ours, half-written; the source checkpoint is untouched
        raise
    atomic_write_text(out / COMPLETE, (path / COMPLETE).read_text())
    return out


def _load_one(engine, path: Path, universal: bool):
    cfg = engine._config
    before = cfg.load_universal_checkpoint
    # ZeRO-3's universal load copies the first param group's hyperparameters into every group
    # (weight decay 0.1 onto the no-decay group); they come from the config, which cannot change
    # across a resume, so the engine's own are put back.
    groups = getattr(engine.optimizer, "param_groups", None) or []
    hyper = [{k: v for k, v in g.items() if k != "params"} for g in groups]
    cfg.load_universal_checkpoint = universal
    try:
        out = engine.load_checkpoint(
            str(path.parent), tag=path.name, load_optimizer_states=True, load_lr_scheduler_states=False
        )
    finally:
        cfg.load_universal_checkpoint = before
    if universal:
        for g, h in zip(engine.optimizer.param_groups, hyper):
            g.update(h)
    return out


def _try_load(
    engine,
    path: Path,
    log,
    world_size: int,
    is_main: bool,
    agree: Callable[[bool], bool],
    universal_out: Path | None = None,
) -> tuple[dict | None, str | None, int | None]:
    """(client state, None, saved ranks) when `path` loaded on every rank, else (None, why, saved ranks).
    A checkpoint written by another number of ranks is converted first (into `universal_out`)."""
    saved = saved_world_size(path)
    universal = saved is not None and saved != world_size
    out = universal_out or path.parent / UNIVERSAL / path.name
    why, client = None, None
    if universal:
        log(
            f"checkpoint {path.name} was written by {saved} ranks and this run has {world_size}: "
            "converting it to a DeepSpeed universal checkpoint"
        )
        if any(path.glob("zero_pp_rank_*_model_states.pt")):  # ZeRO-3 (see README: not bit-exact)
            log(
                "note: a ZeRO-3 run resumed on another world size continues close to, not exactly like, "
                "an uninterrupted run (DeepSpeed's ZeRO-3 universal load)"
            )
        if is_main:
            try:
                convert_to_universal(path, out)
            except Exception as exc:  # reported below, after the other ranks are told
                why = f"conversion to a universal checkpoint failed: {type(exc).__name__}: {exc}"
        if not agree(why is None):
            why = why or "conversion to a universal checkpoint failed on rank 0"
    if why is None:
        try:
            loaded, client = _load_one(engine, out if universal else path, universal)
            if loaded is None or client is None or "scalelab" not in client:
                why = "DeepSpeed found no model states or no scalelab client state in it"
        except Exception as exc:  # corrupt files: fall back to the previous checkpoint
            why = f"{type(exc).__name__}: {exc}"
        if not agree(why is None):
            why = why or "it failed to load on another rank"
    if why is None:
        return client["scalelab"], None, saved
    return None, why, saved if universal else None


def load_latest(
    engine, root: Path, log, world_size: int = 1, is_main: bool = True, agree: Callable[[bool], bool] = lambda ok: ok
) -> dict | None:
    """Load the newest loadable complete checkpoint; returns its client state, or None when there is none.

    `agree(ok)` returns True only if `ok` on every rank, so that all ranks fall back together.
    Raises CheckpointLoadError when complete checkpoints exist and none loads."""
    failures = []
    for _step, path in reversed(complete_checkpoints(root)):
        client, why, saved = _try_load(engine, path, log, world_size, is_main, agree)
        if why is None:
            return client
        ranks = f" [written by {saved} ranks, this run has {world_size}]" if saved else ""
        failures.append(f"{path}{ranks}: {_short(why)}")
        log(f"warning: checkpoint {path.name} could not be loaded ({_short(why)}); trying an older one")
    if failures:
        raise CheckpointLoadError(
            "none of the complete checkpoints could be loaded (nothing was deleted and the run was not restarted):\n  "
            + "\n  ".join(failures)
            + "\nrepair or move aside the damaged checkpoints to resume from an older one, or use another --run-dir "
            "to start afresh"
        )
    return None


def load_parent(
    engine,
    path: Path,
    own_root: Path,
    log,
    world_size: int = 1,
    is_main: bool = True,
    agree: Callable[[bool], bool] = lambda ok: ok,
) -> dict:
    """Load another run's checkpoint `path` (a branch's `train.init_from`); its client state.

    A conversion for another world size goes into this run's own `checkpoints/universal/`, never
    into the parent's directory. Raises CheckpointLoadError when it does not load: a branch never
    silently starts from scratch."""
    out = Path(own_root) / UNIVERSAL / f"init_{path.parent.parent.name}_{path.name}"
    if is_main:
        out.parent.mkdir(parents=True, exist_ok=True)
    client, why, saved = _try_load(engine, path, log, world_size, is_main, agree, universal_out=out)
    if why is None:
        return client
    ranks = f" [written by {saved} ranks, this run has {world_size}]" if saved else ""
    raise CheckpointLoadError(
        f"train.init_from: checkpoint {path}{ranks} could not be loaded: {_short(why)}; nothing was trained or written"
    )


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
