"""Branches: a run that starts from another run's checkpoint (`train.init_from`).

A branch takes over its parent's weights, optimizer state, RNG state and step N. Its data
position and lr are pure functions of the step, so it continues the parent's trajectory exactly,
then follows its own schedule (e.g. a WSD cooldown) to its own length. That is a continuation
only when everything that shapes the trajectory is the parent's: checked here before any work,
against the parent's config.yaml, each difference named by its key (exit 2).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from pydantic import ValidationError

from pretrain.config.schema import TrainConfig
from pretrain.errors import ConfigError
from rundir.checkpoints import CheckpointError, resolve_checkpoint
from rundir.config import read_config
from rundir.schedules import lr_at, warmup_steps

# Sections and keys a branch must share with its parent (train.micro_batch_size may differ: it
# splits the same global batch, e.g. on another number of ranks).
SAME_SECTIONS = ("model", "data", "optim")
SAME_KEYS = ("train.global_batch_size", "train.seed", "precision", "deepspeed.zero_stage")
# Keys that do not change the trajectory (how prepared data is written, not what it holds; the
# vocabulary is filled in from the tokenizer, which the data section already fixes).
IGNORED = {"data.workers", "data.shard_tokens", "model.vocab_size", "model.preset"}
PATHS = {"data.out_dir"}  # compared as the folders they name


def resolve(init_from: str) -> tuple[Path, Path, int]:
    """(parent run dir, checkpoint dir, step), resolved on disk: the newest complete checkpoint of
    a run directory, or the named one (which must be complete). ConfigError naming the key."""

    try:
        return resolve_checkpoint(init_from)
    except CheckpointError as exc:
        raise ConfigError(f"invalid configuration:\n  train.init_from: {exc}") from None


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


def differences(parent, child, step: int) -> list[str]:
    """Why `child` (a TrainConfig) cannot continue `parent` (a TrainConfig) from its step `step`:
    one line per problem, each starting with the key to change. Empty: it can."""

    a, b = _flat(parent.model_dump(mode="json")), _flat(child.model_dump(mode="json"))
    out = []
    for key in sorted(set(a) | set(b)):
        shared = key.split(".")[0] in SAME_SECTIONS or key in SAME_KEYS
        if not shared or key in IGNORED or a.get(key) == b.get(key):
            continue
        if key in PATHS and a.get(key) and b.get(key) and os.path.realpath(a[key]) == os.path.realpath(b[key]):
            continue  # the same folder by another name (a symlink, a relative path)
        out.append(f"{key}: {b.get(key)!r} here, {a.get(key)!r} in the parent (a branch continues its parent's run)")
    length = "train.steps" if child.train.steps is not None else "train.tokens"
    total_p, total_c = parent.total_steps(), child.total_steps()
    if step < 1:
        out.append(f"train.init_from: step {step}: a branch starts from a checkpoint after at least one step")
    if step > total_p:
        out.append(f"train.init_from: step {step} is past the parent's last step ({total_p})")
    if step >= total_c:
        out.append(
            f"{length}: this run has {total_c} steps; a branch must be longer than its branch point (step {step})"
        )
    if out:
        return out
    peak_p, peak_c = parent.peak_lr(), child.peak_lr()
    for k in range(step):
        lp, lc = lr_at(k, total_p, peak_p, parent.schedule), lr_at(k, total_c, peak_c, child.schedule)
        if not math.isclose(lp, lc, rel_tol=1e-9, abs_tol=1e-15):
            keys = [f"schedule.{f}" for f, v in child.schedule.model_dump().items() if getattr(parent.schedule, f) != v]
            hint = ""
            wp, wc = warmup_steps(parent.schedule, total_p), warmup_steps(child.schedule, total_c)
            if wp != wc or parent.schedule.warmup_steps is None or child.schedule.warmup_steps is None:
                hint = (
                    f"; set schedule.warmup_steps={wp} (the parent's warmup): a warmup_fraction is a different number "
                    f"of steps in runs of different lengths"
                )
            out.append(
                f"{', '.join(keys) or 'schedule'}: the lr of step {k + 1} is {lc:.6g} here and {lp:.6g} in the "
                f"parent; a branch must follow its parent's schedule up to its branch point (step {step}){hint}"
            )
            break
    return out


def parent_config(run_dir: Path):
    """The parent's config.yaml as a TrainConfig (ConfigError naming train.init_from when unreadable)."""

    try:
        raw = read_config(run_dir)
        return TrainConfig.model_validate(raw)
    except (CheckpointError, ValidationError, OSError) as exc:
        first = str(exc).splitlines()[0]
        raise ConfigError(
            f"invalid configuration:\n  train.init_from: {run_dir}: the parent's config.yaml cannot be read "
            f"as a train config ({first})"
        ) from None


def check(cfg) -> tuple[Path, Path, int]:
    """The trainer's check before any work: the parent and its complete checkpoint exist and this
    run can continue it. Returns (parent run dir, checkpoint dir, step); ConfigError otherwise."""
    run_dir, ckpt, step = resolve(cfg.train.init_from)
    problems = differences(parent_config(run_dir), cfg, step)
    if problems:
        raise ConfigError(
            f"invalid configuration: train.init_from={cfg.train.init_from} (step {step}):\n  " + "\n  ".join(problems)
        )
    return run_dir, ckpt, step
