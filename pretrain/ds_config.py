"""Our typed config -> a DeepSpeed config dict (the only place that knows DeepSpeed's keys)."""
from __future__ import annotations

import copy
from typing import Any

from pretrain.config.schema import TrainConfig
from pretrain.errors import ConfigError


def grad_accum_steps(cfg: TrainConfig, world_size: int) -> int:
    per_step = cfg.train.micro_batch_size * world_size
    if cfg.train.global_batch_size % per_step:
        raise ConfigError(
            "invalid configuration:\n  train.global_batch_size: "
            f"{cfg.train.global_batch_size} must be a multiple of train.micro_batch_size "
            f"({cfg.train.micro_batch_size}) x world size ({world_size}) = {per_step}"
        )
    return cfg.train.global_batch_size // per_step


def _merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def build_ds_config(cfg: TrainConfig, world_size: int) -> dict[str, Any]:
    ds: dict[str, Any] = {
        "train_batch_size": cfg.train.global_batch_size,
        "train_micro_batch_size_per_gpu": cfg.train.micro_batch_size,
        "gradient_accumulation_steps": grad_accum_steps(cfg, world_size),
        "gradient_clipping": cfg.optim.grad_clip,
        "zero_optimization": {"stage": cfg.deepspeed.zero_stage},
        "steps_per_print": 10**12,  # our logger prints; keep DeepSpeed quiet
        "wall_clock_breakdown": False,
        "zero_allow_untested_optimizer": True,
    }
    if cfg.precision == "bf16":
        ds["bf16"] = {"enabled": True}
    elif cfg.precision == "fp16":
        ds["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    return _merge(ds, cfg.deepspeed.extra)
