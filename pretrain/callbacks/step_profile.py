"""Peak memory and the step-time breakdown on log steps (docs/run-directory.md, "Metric names").

Times come from the train module, which times the log steps' phases (pretrain/engine/step_timer.py):
`time/data_s`, `time/fwd_bwd_s`, `time/optim_s` summed over the step's micro-batches and
`time/step_s` for the whole step. Memory is the peak over the log window, reset after each
record: on CUDA torch's allocator peaks `mem/max_allocated_gb` and `mem/max_reserved_gb`; on CPU,
where torch keeps no allocator statistics, the process's peak resident set `mem/max_rss_gb`
(everything the rank's process holds, not only tensors). Every value is the maximum over ranks
(the slowest or fullest rank is the one that matters); gb are 10^9 bytes.
"""

from __future__ import annotations

import resource
from pathlib import Path

import torch

from pretrain.callbacks.base import Callback

GB = 1e9
_STATUS, _CLEAR = Path("/proc/self/status"), Path("/proc/self/clear_refs")


def reset_peak_rss() -> bool:
    """Restart the kernel's peak-RSS count (VmHWM) of this process; False where it cannot be."""
    try:
        _CLEAR.write_text("5")
        return True
    except OSError:
        return False


def peak_rss_bytes(since_reset: bool) -> float | None:
    """Peak resident set of this process: since the last reset (Linux VmHWM), or since start."""
    if since_reset:
        try:
            for line in _STATUS.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return float(line.split()[1]) * 1024
        except OSError:
            pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
    return float(rss) * 1024 if rss else None


class StepProfile(Callback):
    priority = 45  # beside the speed monitor

    def __init__(self, device: torch.device):
        self.device, self.cuda = device, device.type == "cuda"
        self._resettable = False

    def pre_train(self) -> None:
        self._reset()

    def post_train_batch(self, out) -> None:
        if not self.info.log_step:
            return
        record = self.trainer.record_metric
        for phase, seconds in (out.times or {}).items():
            record(f"time/{phase}_s", seconds, reduce="max")
        if self.cuda:
            record("mem/max_allocated_gb", torch.cuda.max_memory_allocated(self.device) / GB, reduce="max")
            record("mem/max_reserved_gb", torch.cuda.max_memory_reserved(self.device) / GB, reduce="max")
        else:
            rss = peak_rss_bytes(self._resettable)
            if rss is not None:
                record("mem/max_rss_gb", rss / GB, reduce="max")

    def post_step(self) -> None:
        if self.info.log_step:  # after the record: the next window's peak starts here
            self._reset()

    def _reset(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self._resettable = reset_peak_rss()
