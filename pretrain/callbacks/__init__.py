"""One callback per concern of a training run (base.py documents the hooks and their order)."""

from __future__ import annotations

from pretrain.callbacks.base import Callback, StepInfo
from pretrain.checkpoint.evaluators import evaluator

__all__ = ["Callback", "StepInfo", "default_callbacks"]


def default_callbacks(trainer) -> list[Callback]:
    """What `scalelab train` runs with, for the trainer's config (built after its train module)."""
    from pretrain.callbacks.checkpointer import Checkpointer  # deferred: imports torch
    from pretrain.callbacks.console import ConsoleLogger  # deferred: imports torch
    from pretrain.callbacks.faults import FaultInjection  # deferred: imports torch
    from pretrain.callbacks.heldout_eval import HeldOutEvaluation  # deferred: imports torch
    from pretrain.callbacks.metrics_file import MetricsFileWriter  # deferred: imports torch
    from pretrain.callbacks.speed_monitor import SpeedMonitor  # deferred: imports torch
    from pretrain.callbacks.step_profile import StepProfile  # deferred: imports torch
    from pretrain.callbacks.summary_file import SummaryFileWriter  # deferred: imports torch
    from pretrain.callbacks.wandb import WandbCallback  # deferred: imports torch

    cfg, module, feed, d = trainer.cfg, trainer.module, trainer.feed, trainer.dist
    speed = SpeedMonitor(
        trainer.counts.flops_per_token,
        cfg.tokens_per_step(),
        d.world_size,
        d.device,
        cfg.precision,
        cfg.train.device_peak_flops,
        tf32=module.tf32,
    )
    out = [
        Checkpointer(module),
        trainer.signals,
        speed,
        MetricsFileWriter(),
        WandbCallback(),
        ConsoleLogger(trainer.console),
        HeldOutEvaluation(module, feed.val_parts),
        SummaryFileWriter(module, trainer.counts, feed, speed),
        StepProfile(d.device),
    ]
    if cfg.train.noise_scale_every_steps:
        from pretrain.callbacks.noise_scale import NoiseScale  # deferred: imports torch

        out.append(NoiseScale(module, feed.sampler))
    if getattr(cfg.model, "moe", None) is not None:
        from pretrain.callbacks.moe import MoERouterMetrics, RoutingStability  # deferred: imports torch

        out += [MoERouterMetrics(module), RoutingStability(module, feed.val_parts)]
    if cfg.eval is not None:
        from pretrain.callbacks.inloop_eval import CheckpointEvaluation  # deferred: imports torch

        out.append(CheckpointEvaluation(evaluator(), cfg.eval))
    fault = FaultInjection.from_env(module)
    if fault is not None:
        out.append(fault)
    return out
