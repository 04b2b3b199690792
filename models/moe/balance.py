"""Router controllers: one update after each optimizer step for every router of a model.

aux_free_bias moves its selection bias by `b += rate * sign(mean_load - load)` (DeepSeek-V3),
relu_l1 scales its L1 coefficient, sigmoid_threshold moves its per-expert thresholds, and
softmax_topk's global_batch scope resets its step loads. Each router counts what its controller
needs during the step's training forwards (`Router.step_counts`); the counts of all layers are
stacked into one tensor so the sum over data-parallel ranks is a single all-reduce per step, not
one per layer (as Megatron's `get_updated_expert_bias` and torchtitan's optimizer pre-hook do).

Call `update_router_controllers(model)` on every rank after every optimizer step (also a skipped
one: the counts are spent either way); the trainer does it as a post-step hook of its train
module (pretrain/engine/train_module.py). Routing is decided on each rank before any
expert-parallel exchange, so the counts each rank holds cover all experts and the default (world)
group is the data-parallel sum, with or without expert parallelism.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from models.moe.routers.aux_free_bias import AuxFreeBiasRouter, sign_update
from models.moe.routers.base import Router

__all__ = ["bias_routers", "sign_update", "update_expert_biases", "update_router_controllers"]


def bias_routers(model: nn.Module) -> list[AuxFreeBiasRouter]:
    return [m for m in model.modules() if isinstance(m, AuxFreeBiasRouter)]


@torch.no_grad()
def update_router_controllers(model: nn.Module, group=None) -> int:
    """Sum every router's step counts over `group` (None: the default group, when torch.distributed
    is initialised) in one all-reduce, update each controller and reset its counts. Returns the
    number of routers with a controller."""
    routers = [m for m in model.modules() if isinstance(m, Router)]
    parts = [(r, r.step_counts()) for r in routers]
    counted = [(r, c) for r, c in parts if c is not None]
    if counted:
        flat = torch.cat([c.reshape(-1).double() for _, c in counted])
        if dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1:
            dist.all_reduce(flat, group=group)
        for (r, c), summed in zip(counted, flat.split([c.numel() for _, c in counted])):
            r.end_step(summed.view(c.shape))
    for r, counts in parts:
        if counts is None:
            r.end_step(None)
    return len(counted)


def update_expert_biases(model: nn.Module, group=None) -> int:
    """The aux_free_bias update alone (kept for callers of the earlier name): every controller is updated."""
    update_router_controllers(model, group)
    return len(bias_routers(model))
