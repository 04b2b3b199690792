"""Bitwise-reproducible training (`train.deterministic`, on by default).

Two runs of one config, or a run and its resume, must compute the same bits whatever else the
machine is doing. What can make them differ is how work is split between threads: a reduction
split into a different number of chunks adds in a different order. The trainer fixes the thread
count from the configuration or the CPU allocation (pretrain/engine/distributed.py, never from load);
this module removes the remaining run-time choices:

- OpenMP dynamic teams: with OMP_DYNAMIC=true (set by some cluster environments) libgomp sizes
  each parallel region from the load average, so a loaded machine splits reductions differently.
- oneMKL dynamic threading (MKL_DYNAMIC, on by default): Intel's reproducibility conditions ask
  for it off, so a GEMM always runs with the same number of threads.
- torch.use_deterministic_algorithms: deterministic kernels where torch has a choice (CUDA
  scatter/index-add, cuDNN/cuBLAS algorithm selection), with CUBLAS_WORKSPACE_CONFIG set as the
  torch docs require; cuDNN autotuning off.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import torch


def _call(lib: str, fn: str) -> bool:
    """Call `fn(0)` of a library shipped inside torch (its own OpenMP and MKL); False when absent."""
    path = Path(torch.__file__).parent / "lib" / lib
    try:
        getattr(ctypes.CDLL(str(path)), fn)(ctypes.c_int(0))
        return True
    except (OSError, AttributeError):
        return False


def make_deterministic(device: torch.device) -> None:
    """Call once per process, before the first CUDA kernel."""
    os.environ["OMP_DYNAMIC"] = "false"  # for child processes
    os.environ["MKL_DYNAMIC"] = "false"
    _call("libgomp.so.1", "omp_set_dynamic")
    if torch.backends.mkl.is_available():
        _call("libtorch_cpu.so", "MKL_Set_Dynamic")  # the C entry point (mkl_set_dynamic takes a pointer)
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
    # warn_only: an op without a deterministic implementation warns instead of ending a long run
    torch.use_deterministic_algorithms(True, warn_only=True)
