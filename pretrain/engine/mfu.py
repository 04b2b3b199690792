"""Model FLOPs utilisation against a per-device peak at the precision actually used.

GPU peaks are the dense (no sparsity) datasheet figures of `rundir.devices` (the table the cost
projections use), looked up by the name torch reports, so SXM and PCIe parts get their own peaks.
The precision is the one the matmuls run in: bf16/fp16, TF32 for fp32 with `train.tf32` on a GPU
that has TF32 tensor cores (compute capability 8.0+), plain FP32 otherwise -- an fp32 run without
TF32 is never measured against the TF32 peak. The CPU peak is measured: the best of a few fp32
matmuls at the current thread count.
"""

from __future__ import annotations

import time

import torch

from rundir.devices import DEVICES, device_from_name


def set_tf32(device: torch.device, enabled: bool) -> bool:
    """Allow (or forbid) TF32 tensor cores for fp32 matmuls and convolutions on CUDA; returns
    whether fp32 matmuls now run in TF32 (never on CPU, nor on GPUs before Ampere)."""
    if device.type != "cuda":
        return False
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    return enabled and torch.cuda.get_device_capability(device)[0] >= 8


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
