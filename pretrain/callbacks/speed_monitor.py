"""Throughput over each log window: tokens/s, MFU against the device's peak, ETA and wall time.

Time the trainer spends paused (checkpoints, held-out and in-loop evaluation, noise probes: every
`with trainer.paused(...)`) is left out of the window, so tokens_per_s measures training alone.
The peak is per device and precision (below: a table for GPUs, at TF32 for fp32 runs only
when TF32 is on; a measured fp32 matmul peak on CPU).

GPU peaks are the dense (no sparsity) datasheet figures of `rundir.accelerators` (the table the cost
projections use), looked up by the name torch reports, so SXM and PCIe parts get their own peaks.
The precision is the one the matmuls run in: bf16/fp16, TF32 for fp32 with `train.tf32` on a GPU
that has TF32 tensor cores (compute capability 8.0+), plain FP32 otherwise -- an fp32 run without
TF32 is never measured against the TF32 peak. The CPU peak is measured: the best of a few fp32
matmuls at the current thread count.
"""

from __future__ import annotations

import time

import torch

from pretrain.callbacks.base import Callback
from rundir.accelerators import DEVICES, device_from_name


def matmul_precision(precision: str, tf32: bool) -> str:
    """The peak-table precision of a run: its `precision`, or tf32 for fp32 running on TF32 cores."""
    return "tf32" if precision == "fp32" and tf32 else precision


def gpu_peak(device_name: str, precision: str) -> float | None:
    """Dense peak FLOP/s of the GPU torch names `device_name` at a table precision, or None."""
    key = device_from_name(device_name)
    return DEVICES[key].get(precision) if key else None


def measure_cpu_peak(n: int = 1024, reps: int = 4) -> float:
    """Best observed fp32 matmul FLOP/s (n^3 GEMM) with the current torch thread count."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm-up
    best = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        best = max(best, 2 * n**3 / (time.perf_counter() - t0))
    return best


def device_peak(
    device: torch.device, precision: str, override: float | None = None, tf32: bool = False
) -> tuple[float, str]:
    """(peak FLOP/s per rank, where it came from); `tf32`: fp32 matmuls run in TF32 (`set_tf32`)."""
    if override:
        return override, "config"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        used = matmul_precision(precision, tf32)
        peak = gpu_peak(name, used)
        if peak:
            return peak, f"table:{name}:{used}"
        return float("nan"), f"unknown GPU {name} ({used}): set train.device_peak_flops"
    return measure_cpu_peak(), "measured-cpu-fp32"


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
        self._t0, self._paused0, self._steps = time.perf_counter(), self.trainer.state.paused_s, 0

    def pre_step(self) -> None:
        if self._t0 is None:  # the first window starts at the first step, after every callback's set-up
            self._start()

    def post_train_batch(self, out) -> None:
        self._steps += 1
        info = self.info
        if not info.log_step:
            return
        elapsed = max(1e-9, time.perf_counter() - self._t0 - (self.trainer.state.paused_s - self._paused0))
        tok_s = self._steps * self.tokens_per_step / elapsed
        record = self.trainer.record_metric
        record("tokens_per_s", tok_s, reduce="none")
        record("mfu", self.flops_per_token * tok_s / (self.peak * self.world_size), reduce="none")
        record("eta_s", (info.total_steps - info.step) * elapsed / self._steps, reduce="none")
        record("wall_s", self.trainer.state.wall_s, reduce="none")

    def post_step(self) -> None:
        if self.info.log_step:  # after the record is written: the next window starts here
            self._start()
