"""Partitioned model construction under ZeRO-3 (`deepspeed.zero_init`, on by default).

Without it every rank builds the whole fp32 model before `deepspeed.initialize` partitions it,
so the largest trainable model is bounded by one rank's memory. Inside `deepspeed.zero.Init`
each module's parameters are partitioned over the data-parallel ranks as soon as the module's
`__init__` returns: a rank never holds more than one module's full parameters at a time.

What the model's own initialisation must respect (models/ stay DeepSpeed-free):
- writes inside a module's `__init__` (nn.Linear's reset, RMSNorm's ones, the experts' and
  routers' normal draws) happen before that module is partitioned and are kept;
- the model-wide re-initialisation (`models.layers.init_weights`) runs through `Module.apply`,
  which `zero.Init` wraps to gather each module's parameters around the function and to
  broadcast rank 0's values before re-partitioning them;
- the tied output projection is the embedding's (partitioned) parameter itself.
Every rank draws the same random numbers in the same order as an unpartitioned build, so on CPU
the initial weights equal the unpartitioned build's bit for bit. On CUDA, `zero.Init` creates the
tensors on the GPU, so the draws come from the CUDA generator: the same weights for a seed in
every ZeRO-3 run, but not the CPU-built (zero_init: false) weights.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from pretrain.config.schema import TrainConfig


def partitioned(cfg: TrainConfig, ds_config: dict):
    """The context to build the model in: `deepspeed.zero.Init` under ZeRO-3 with zero_init, else none."""
    if cfg.deepspeed.zero_stage != 3 or not cfg.deepspeed.zero_init:
        return nullcontext()
    import deepspeed  # deferred: imports deepspeed

    return deepspeed.zero.Init(config_dict_or_path=ds_config)


def held_parameters(model: torch.nn.Module) -> tuple[int, int]:
    """(elements this rank holds, elements of the whole model), each parameter counted once
    (tied weights); a partitioned parameter counts its local partition."""
    held = total = 0
    seen: set[int] = set()
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        part = getattr(p, "ds_tensor", None)
        held += part.numel() if part is not None else p.numel()
        total += getattr(p, "ds_numel", p.numel())
    return held, total


def describe_shares(model: torch.nn.Module, world_size: int, device: torch.device) -> str:
    """One line naming each rank's share of the parameters (an all-gather: call on every rank)."""
    held, total = held_parameters(model)
    counts = [held]
    if world_size > 1 and torch.distributed.is_initialized():
        t = torch.tensor([held], dtype=torch.int64, device=device)
        out = [torch.zeros_like(t) for _ in range(world_size)]
        torch.distributed.all_gather(out, t)
        counts = [int(x.item()) for x in out]
    shares = ", ".join(f"rank {r} {n:,} ({n / total:.1%})" for r, n in enumerate(counts))
    return f"ZeRO-3 partitioned init: parameter elements held per rank after the build: {shares} of {total:,}"
