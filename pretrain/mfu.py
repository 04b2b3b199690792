"""Model FLOPs utilisation against a per-device peak (never one hard-coded number).

GPU peaks are dense (no sparsity) tensor-core figures from the vendors' data sheets; the CPU
peak is measured: the best of a few fp32 matmuls at the current thread count.
"""
from __future__ import annotations

import time

import torch

# (substring of torch.cuda.get_device_name, precision) -> peak FLOP/s
GPU_PEAKS: dict[tuple[str, str], float] = {
    ("H200", "bf16"): 989e12, ("H200", "fp16"): 989e12, ("H200", "fp32"): 494e12,  # fp32 via TF32
    ("H100", "bf16"): 989e12, ("H100", "fp16"): 989e12, ("H100", "fp32"): 494e12,
    ("A100", "bf16"): 312e12, ("A100", "fp16"): 312e12, ("A100", "fp32"): 156e12,
    ("L40S", "bf16"): 362e12, ("L40S", "fp16"): 362e12, ("L40S", "fp32"): 183e12,
    ("A10G", "bf16"): 125e12, ("A10G", "fp16"): 125e12, ("A10G", "fp32"): 62.5e12,
}


def gpu_peak(device_name: str, precision: str) -> float | None:
    for (key, prec), peak in GPU_PEAKS.items():
        if key in device_name and prec == precision:
            return peak
    return None


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


def device_peak(device: torch.device, precision: str, override: float | None = None) -> tuple[float, str]:
    """(peak FLOP/s per rank, where it came from)."""
    if override:
        return override, "config"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        peak = gpu_peak(name, precision)
        if peak:
            return peak, f"table:{name}"
        return float("nan"), f"unknown GPU {name}: set train.device_peak_flops"
    return measure_cpu_peak(), "measured-cpu-fp32"
