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

from pretrain.config.roles import changed, must_match_on_branch, path_keys
from pretrain.config.schema import TrainConfig
from pretrain.errors import ConfigError
from rundir.checkpoints import CheckpointError, resolve_checkpoint
from rundir.config import read_config
from rundir.schedules import lr_at, warmup_steps


def resolve(init_from: str) -> tuple[Path, Path, int]:
    """(parent run dir, checkpoint dir, step), resolved on disk: the newest complete checkpoint of
    a run directory, or the named one (which must be complete). ConfigError naming the key."""

    try:
        return resolve_checkpoint(init_from)
    except CheckpointError as exc:
        raise ConfigError(f"invalid configuration:\n  train.init_from: {exc}") from None


def differences(parent, child, step: int) -> list[str]:
    """Why `child` (a TrainConfig) cannot continue `parent` (a TrainConfig) from its step `step`:
    one line per problem, each starting with the key to change. Empty: it can. The keys compared are
    the schema's BRANCH ones less its BOOKKEEPING ones (pretrain.config.roles; train.micro_batch_size
    may differ: it splits the same global batch, e.g. on another number of ranks)."""

    out = []
    for key, a, b in changed(parent.model_dump(mode="json"), child.model_dump(mode="json"), must_match_on_branch):
        if key in path_keys() and a and b and os.path.realpath(a) == os.path.realpath(b):
            continue  # the same folder by another name (a symlink, a relative path)
        out.append(f"{key}: {b!r} here, {a!r} in the parent (a branch continues its parent's run)")
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
