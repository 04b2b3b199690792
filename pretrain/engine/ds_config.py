"""Our typed config -> a DeepSpeed config dict (the only place that knows DeepSpeed's keys)."""

from __future__ import annotations

import copy
from typing import Any

from pretrain.config.schema import TrainConfig
from pretrain.errors import ConfigError

# ZeRO's gradient bucket on CPU, in elements. DeepSpeed's default (5e8: a 2 GB fp32 buffer) is held
# by GPUs' caching allocator, but on CPU it is allocated anew each step: a tiny ZeRO-1 step took
# 4.7 s of forward+backward instead of 0.075 s (same losses), and 2.5 GB of RSS instead of 0.5 GB.
CPU_BUCKET = 5_000_000


def grad_accum_steps(cfg: TrainConfig, world_size: int) -> int:
    per_step = cfg.train.micro_batch_size * world_size
    if cfg.train.global_batch_size % per_step:
        raise ConfigError(
            "invalid configuration:\n  train.global_batch_size: "
            f"{cfg.train.global_batch_size} must be a multiple of train.micro_batch_size "
            f"({cfg.train.micro_batch_size}) x world size ({world_size}) = {per_step}"
        )
    return cfg.train.global_batch_size // per_step


def engine_zero_stage(cfg: TrainConfig) -> int:
    """The ZeRO stage DeepSpeed's engine runs. optim.name muon runs on the ZeRO-0 engine: its
    ZeRO-1 (whole tensors shared out over the ranks) lives in the optimizer (pretrain/optim/muon.py),
    because DeepSpeed's ZeRO-1 hands the optimizer flat slices, and Muon needs whole matrices."""
    return 0 if cfg.optim.name == "muon" else cfg.deepspeed.zero_stage


def bf16_settings(zero_stage: int) -> dict[str, Any]:
    """bf16 compute with fp32 master weights, fp32 gradient accumulation and fp32 reductions.

    Summing many micro-batch or rank gradients in bf16 (8 mantissa bits) loses every
    contribution below 1/256 of the running sum, so, as Megatron, OLMo-core and FSDP2 do, grads
    are accumulated and all-reduced / reduce-scattered in fp32. ZeRO 1-3: bf16 parameters (and
    bf16 ZeRO-3 gathers), fp32 optimizer master copy, `data_types.grad_accum_dtype` and
    `communication_data_type` fp32. ZeRO-0: DeepSpeed has no fp32 accumulation for bf16
    parameters, so the parameters stay fp32 (they are the master weights, and their grads are
    fp32) and the forward runs under torch.autocast(bf16); `lower_precision_safe_modules: []`
    keeps DeepSpeed from reducing any gradient in bf16.
    """
    if zero_stage == 0:
        return {"torch_autocast": {"enabled": True, "dtype": "bfloat16", "lower_precision_safe_modules": []}}
    return {
        "bf16": {"enabled": True},
        "data_types": {"grad_accum_dtype": "fp32"},
        "communication_data_type": "fp32",
    }


def _merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def build_ds_config(cfg: TrainConfig, world_size: int, cuda: bool = True) -> dict[str, Any]:
    """`cuda`: the ranks run on GPUs (else CPU-sized ZeRO buckets); `deepspeed.extra` wins over all."""
    ds: dict[str, Any] = {
        "train_batch_size": cfg.train.global_batch_size,
        "train_micro_batch_size_per_gpu": cfg.train.micro_batch_size,
        "gradient_accumulation_steps": grad_accum_steps(cfg, world_size),
        "gradient_clipping": cfg.optim.grad_clip,
        "zero_optimization": {"stage": engine_zero_stage(cfg)},
        "steps_per_print": 10**12,  # our logger prints; keep DeepSpeed quiet
        "wall_clock_breakdown": False,
        "zero_allow_untested_optimizer": True,
    }
    if not cuda:
        ds["zero_optimization"].update(reduce_bucket_size=CPU_BUCKET, allgather_bucket_size=CPU_BUCKET)
    if cfg.precision == "bf16":
        ds.update(bf16_settings(engine_zero_stage(cfg)))
    elif cfg.precision == "fp16":
        ds["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    return _merge(ds, cfg.deepspeed.extra)
