"""Throughput over each log window: tokens/s, MFU against the device's peak, ETA and wall time.

Time the trainer spends paused (checkpoints, held-out and in-loop evaluation, noise probes: every
`with trainer.paused(...)`) is left out of the window, so tokens_per_s measures training alone.
The peak is per device and precision (pretrain/engine/mfu.py: a table for GPUs, at TF32 for fp32 runs only
when TF32 is on; a measured fp32 matmul peak on CPU).
"""

from __future__ import annotations

import time

from pretrain.callbacks.base import Callback
from pretrain.engine.mfu import device_peak


class SpeedMonitor(Callback):
    priority = 50

    def __init__(
        self,
        flops_per_token: float,
        tokens_per_step: int,
        world_size: int,
        device,
        precision: str,
        peak_override: float | None = None,
        tf32: bool = False,
    ):
        self.flops_per_token, self.tokens_per_step, self.world_size = flops_per_token, tokens_per_step, world_size
        self.peak, self.peak_source = device_peak(device, precision, peak_override, tf32)
        self._t0: float | None = None

    def _start(self) -> None:
        self._t0, self._paused0, self._steps = time.perf_counter(), self.trainer.paused_s, 0

    def pre_step(self) -> None:
        if self._t0 is None:  # the first window starts at the first step, after every callback's set-up
            self._start()

    def post_train_batch(self, out) -> None:
        self._steps += 1
        info = self.info
        if not info.log_step:
            return
        elapsed = max(1e-9, time.perf_counter() - self._t0 - (self.trainer.paused_s - self._paused0))
        tok_s = self._steps * self.tokens_per_step / elapsed
        record = self.trainer.record_metric
        record("tokens_per_s", tok_s, reduce="none")
        record("mfu", self.flops_per_token * tok_s / (self.peak * self.world_size), reduce="none")
        record("eta_s", (info.total_steps - info.step) * elapsed / self._steps, reduce="none")
        record("wall_s", self.trainer.state.wall_s, reduce="none")

    def post_step(self) -> None:
        if self.info.log_step:  # after the record is written: the next window starts here
            self._start()
