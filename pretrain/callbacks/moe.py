"""MoE routers: the aux-free bias update after every optimizer step (`update_expert_biases`: all
layers in one all-reduce), and router health metrics on log steps, aggregated over all micro-batches and all
ranks of the step (models/moe/metrics.py sums the counts; one all-reduce sums the ranks)."""

from __future__ import annotations

import torch.distributed as dist

from models.moe.balance import update_expert_biases
from models.moe.metrics import pack, summarize_totals, totals, unpack
from pretrain.callbacks.base import Callback


class MoERouterMetrics(Callback):
    priority = 80  # the bias update comes right after the optimizer step, before any probe or evaluation

    def __init__(self, module):
        self.module = module

    def post_train_batch(self, out) -> None:
        update_expert_biases(self.module.model)  # every rank, every step (a skipped update spent its counts too)
        if self.info.log_step and out.router_stats:
            for k, v in step_metrics(out.router_stats, self.module.dist.world_size).items():
                self.trainer.record_metric(k, v, reduce="none")  # already over all ranks


def step_metrics(micro_stats: list[list[dict]], world_size: int) -> dict[str, float]:
    """Router metrics of one step from this rank's micro-batches, summed over the ranks."""
    t = totals(micro_stats)
    if world_size > 1 and dist.is_initialized():
        flat = pack(t)
        dist.all_reduce(flat)
        t = unpack(flat, t)
    return summarize_totals(t)
