"""The trainer's side of the MoE router controllers (models/moe/balance.py holds the rules).

- After every optimizer step (a post-step hook of the train module, also after a skipped
  update: the counts are spent either way) every router's controller is updated from its counts
  summed over the data-parallel ranks in one all-reduce: aux_free_bias's bias, relu_l1's L1
  coefficient, sigmoid_threshold's thresholds, softmax_topk's global-batch loads (reset).
- softmax_topk with `aux_loss_scope: global_batch` sums each micro-batch's expert loads over the
  ranks before its balance loss is formed: the all-reduce is installed here as the router's
  `count_reducer` (models/ knows no process group). Every rank runs every training micro-batch,
  so the collective is matched.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from models.moe.balance import update_router_controllers
from models.moe.routers.base import Router
from models.moe.routers.softmax_topk import SoftmaxTopKRouter


def _sum_over_ranks(counts: torch.Tensor) -> torch.Tensor:
    out = counts.clone()
    dist.all_reduce(out)
    return out


def attach_router_controllers(module) -> int:
    """Register the controller update as `module`'s post-step hook and install the global-batch
    reducers; returns the number of routers (0: a dense model, nothing attached)."""
    routers = [m for m in module.model.modules() if isinstance(m, Router)]
    if not routers:
        return 0
    many = module.dist.world_size > 1 and dist.is_initialized()
    for r in routers:
        if isinstance(r, SoftmaxTopKRouter) and r.cfg.aux_loss_scope == "global_batch":
            r.count_reducer = _sum_over_ranks if many else None
    module.add_post_step_hook(lambda step, out: update_router_controllers(module.model))
    return len(routers)
