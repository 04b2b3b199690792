"""Which callbacks a run has, and building them (cf. OLMo-core's `TrainerConfig.callbacks` and
`CallbackConfig.build`): `CallbacksConfig.from_config` decides once from the run's config (and the
test-only fault variables), `build` makes them from the parts they work on (`RunParts`), which
each callback is given rather than reading off the trainer. The trainer only orders and calls them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pretrain.callbacks.base import Callback
from pretrain.checkpoint.evaluators import evaluator

if TYPE_CHECKING:
    from models.accounting import ModelCounts
    from pretrain.callbacks.console import Progress
    from pretrain.callbacks.signals import Signals
    from pretrain.config.schema import TrainConfig
    from pretrain.engine.train_module import DeepSpeedTrainModule
    from pretrain.feed.train_feed import TrainFeed


@dataclass(frozen=True)
class RunParts:
    """What callbacks work on, made by the trainer before they are built."""

    module: DeepSpeedTrainModule  # built: model, optimizer, engine
    feed: TrainFeed
    counts: ModelCounts  # parameters and FLOPs per token (models/accounting.py)
    progress: Progress  # the console (its messages are the trainer's log)
    signals: Signals  # installed by the trainer before the build: a signal during it is not lost


@dataclass(frozen=True)
class CallbacksConfig:
    """The run's callbacks beyond those every run has (checkpoints, signals, speed, metrics file, W&B,
    console, held-out evaluation, summary, step profile)."""

    config: TrainConfig
    noise_scale: bool = False  # train.noise_scale_every_steps > 0
    moe: bool = False  # an MoE model: router metrics and routing stability
    eval: Any = None  # the `eval:` section: in-loop checkpoint evaluation
    faults: Mapping[str, int | None] | None = None  # FaultInjection's settings (tests, benchmarks)
    extra: Sequence[Callback] = field(default_factory=tuple)  # given by the caller (tests)

    @classmethod
    def from_config(
        cls, cfg: TrainConfig, extra: Sequence[Callback] = (), env: Mapping[str, str] = os.environ
    ) -> CallbacksConfig:
        from pretrain.callbacks.faults import faults_from_env  # deferred: imports torch

        return cls(
            config=cfg,
            noise_scale=bool(cfg.train.noise_scale_every_steps),
            moe=getattr(cfg.model, "moe", None) is not None,
            eval=cfg.eval,
            faults=faults_from_env(env),
            extra=tuple(extra),
        )

    def build(self, parts: RunParts) -> list[Callback]:
        """The callbacks, in the order given (the trainer sorts them by priority, stably)."""
        from pretrain.callbacks.checkpointer import Checkpointer  # deferred: imports torch
        from pretrain.callbacks.console import ConsoleLogger  # deferred: imports torch
        from pretrain.callbacks.heldout_eval import HeldOutEvaluation  # deferred: imports torch
        from pretrain.callbacks.metrics_file import MetricsFileWriter  # deferred: imports torch
        from pretrain.callbacks.speed_monitor import SpeedMonitor  # deferred: imports torch
        from pretrain.callbacks.step_profile import StepProfile  # deferred: imports torch
        from pretrain.callbacks.summary_file import SummaryFileWriter  # deferred: imports torch
        from pretrain.callbacks.wandb import WandbCallback  # deferred: imports torch

        cfg, module, feed, d = self.config, parts.module, parts.feed, parts.module.dist
        speed = SpeedMonitor(
            parts.counts.flops_per_token,
            cfg.tokens_per_step(),
            d.world_size,
            d.device,
            cfg.precision,
            cfg.train.device_peak_flops,
            tf32=module.tf32,
        )
        out: list[Callback] = [
            Checkpointer(module),
            parts.signals,
            speed,
            MetricsFileWriter(),
            WandbCallback(),
            ConsoleLogger(parts.progress),
            HeldOutEvaluation(module, feed.val_parts),
            SummaryFileWriter(module, parts.counts, feed, speed),
            StepProfile(d.device),
        ]
        if self.noise_scale:
            from pretrain.callbacks.noise_scale import NoiseScale  # deferred: imports torch

            out.append(NoiseScale(module, feed.sampler))
        if self.moe:
            from pretrain.callbacks.moe import MoERouterMetrics, RoutingStability  # deferred: imports torch

            out += [MoERouterMetrics(module, parts.counts.flops_per_token), RoutingStability(module, feed.val_parts)]
        if self.eval is not None:
            from pretrain.callbacks.inloop_eval import CheckpointEvaluation  # deferred: imports torch

            out.append(CheckpointEvaluation(evaluator(), self.eval))
        if self.faults is not None:
            from pretrain.callbacks.faults import FaultInjection  # deferred: imports torch

            out.append(FaultInjection(module, **self.faults))
        return out + list(self.extra)
