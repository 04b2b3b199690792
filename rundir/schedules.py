"""Learning-rate schedules as pure functions of the step (so resume needs no scheduler state).

Part of the run contract: the lr a run's `schedule` section implies at every step, for the trainer
and for readers that need a run's whole lr curve (the annealing-law fitter) without torch.
"""

from __future__ import annotations

import math
from typing import Literal, Protocol


class ScheduleConfig(Protocol):
    """What a schedule needs (pretrain.config.schema.ScheduleConfig, or any object with these fields)."""

    name: Literal["cosine", "linear", "constant", "wsd"]
    warmup_steps: int | None
    warmup_fraction: float
    min_lr_ratio: float
    decay_fraction: float
    decay_shape: Literal["linear", "cosine", "sqrt"]
    decay_steps: int | None  # optional (wsd): the decay's length in steps, instead of decay_fraction


def warmup_steps(cfg: ScheduleConfig, total: int) -> int:
    if cfg.warmup_steps is not None:
        return min(cfg.warmup_steps, total)
    return int(round(cfg.warmup_fraction * total))


def decay_steps(cfg: ScheduleConfig, total: int) -> int:
    """wsd: steps in the final decay (an object without `decay_steps` reads as decay_fraction's)."""
    given = getattr(cfg, "decay_steps", None)
    if given is not None:
        return max(1, min(int(given), total))
    return max(1, int(round(cfg.decay_fraction * total)))


def lr_at(step: int, total: int, peak: float, cfg: ScheduleConfig) -> float:
    """LR used for optimizer step `step` (0-based) of `total`."""
    warm = warmup_steps(cfg, total)
    if warm and step < warm:
        return peak * (step + 1) / warm
    floor = peak * cfg.min_lr_ratio
    if cfg.name == "constant":
        return peak
    span = max(1, total - warm)
    frac = min(1.0, (step - warm) / span)
    if cfg.name == "cosine":
        return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * frac))
    if cfg.name == "linear":
        return peak + (floor - peak) * frac
    # wsd: warmup, stable at peak, then decay over the last decay_steps (or decay_fraction of all) steps.
    decay = decay_steps(cfg, total)
    start = max(warm, total - decay)
    if step < start:
        return peak
    d = min(1.0, (step - start + 1) / max(1, total - start))
    shape = {"linear": d, "cosine": 0.5 * (1 - math.cos(math.pi * d)), "sqrt": math.sqrt(d)}[cfg.decay_shape]
    return peak + (floor - peak) * shape
