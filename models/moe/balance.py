"""Auxiliary-loss-free balancing: one bias update for every `aux_free_bias` layer of a model.

After each optimizer step, every layer's selection bias moves by
`b += rate * sign(mean_load - load)` (DeepSeek-V3), `load` being the assignments the layer counted
over that step's micro-batches, summed over data-parallel ranks. The loads of all layers are
stacked into one tensor so the sum over ranks is a single all-reduce per step, not one per layer
(as Megatron's `get_updated_expert_bias` and torchtitan's optimizer pre-hook do).

Call `update_expert_biases(model)` on every rank after every optimizer step (also a skipped one:
the counted load is spent either way). Routing is decided on each rank before any expert-parallel
exchange, so the load each rank counts covers all experts and the default (world) group is the
data-parallel sum, with or without expert parallelism.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from models.moe.routers.aux_free_bias import AuxFreeBiasRouter


def bias_routers(model: nn.Module) -> list[AuxFreeBiasRouter]:
    return [m for m in model.modules() if isinstance(m, AuxFreeBiasRouter)]


def sign_update(bias: torch.Tensor, load: torch.Tensor, rate: float) -> None:
    """b += rate * sign(mean_load - load), in place: overloaded experts become less attractive.
    A layer that counted nothing (no training forward since the last update) keeps its bias."""
    if load.sum() > 0:
        bias += rate * torch.sign(load.mean() - load)


@torch.no_grad()
def update_expert_biases(model: nn.Module, group=None) -> int:
    """Apply the bias update to every aux_free_bias router of `model` with one all-reduce over
    `group` (None: the default group, when torch.distributed is initialised); reset the counts.
    Returns the number of layers updated."""
    routers = bias_routers(model)
    if not routers:
        return 0
    load = torch.cat([r.step_load for r in routers])
    if dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1:
        dist.all_reduce(load, group=group)
    for r, layer_load in zip(routers, load.split([r.step_load.numel() for r in routers])):
        sign_update(r.score_bias, layer_load, r.cfg.bias_update_rate)
        r.step_load.zero_()
    return len(routers)
