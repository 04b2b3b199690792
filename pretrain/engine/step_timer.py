"""Seconds spent in each phase of an optimizer step (data, forward+backward, optimizer), summed
over the step's micro-batches, and in DeepSpeed's collectives, on the steps that are logged.

Off (every other step) it only enters empty context managers. On, a CUDA run synchronizes the
device at each phase boundary, so the GPU work a phase queued is charged to it rather than to the
next host sync; those syncs happen on log steps only, so the steps in between keep the GPU fed.

Communication (`comm`) is read from DeepSpeed's comms logger (`deepspeed.comm`), switched on for
the timed step only: every collective DeepSpeed issues through `deepspeed.comm` (ZeRO's gradient
reduce/reduce-scatter, ZeRO-3's parameter all-gathers, MoE all-to-alls) is then synchronized and
timed by the wall clock (CUDA events on GPUs). It overlaps the phases (ZeRO reduces gradients
during backward), so it is a part of fwd_bwd + optim, not a fourth addend. Works with gloo and NCCL.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch

PHASES = ("data", "fwd_bwd", "optim")


class CommTimer:
    """Total seconds of DeepSpeed's collectives between `start()` and `stop()`."""

    def __init__(self):
        from deepspeed.comm import comm  # deferred: imports deepspeed

        self._comm = comm
        self._saved: tuple | None = None

    def start(self) -> None:
        log = self._comm.comms_logger
        self._saved = (log.enabled, log.prof_all, log.verbose)
        self._reset()
        log.enabled, log.prof_all, log.verbose = True, True, False

    def stop(self) -> float:
        log = self._comm.comms_logger
        ms = sum(t.elapsed(reset=False) for t in self._comm.timers.get_timers().values())
        log.enabled, log.prof_all, log.verbose = self._saved
        if not log.enabled:  # ours alone: keep nothing, or the logger's records would grow every log step
            self._reset()
        return ms / 1000.0

    def _reset(self) -> None:
        for t in self._comm.timers.get_timers().values():
            t.reset()
        self._comm.comms_logger.comms_dict.clear()


class StepTimer:
    def __init__(self, device: torch.device, enabled: bool):
        self.enabled, self.sync = enabled, enabled and device.type == "cuda"
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self._comm = CommTimer() if enabled else None
        if self._comm:
            self._comm.start()
        self._t0 = time.perf_counter()

    @contextmanager
    def phase(self, name: str):
        if not self.enabled:
            yield
            return
        if self.sync:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if self.sync:
                torch.cuda.synchronize()
            self.seconds[name] += time.perf_counter() - t0

    def result(self) -> dict[str, float] | None:
        """{phase: seconds, "comm": seconds in DeepSpeed's collectives, "step": the whole step's
        seconds}, or None when not timed."""
        if not self.enabled:
            return None
        step = time.perf_counter() - self._t0
        return {**self.seconds, "comm": self._comm.stop(), "step": step}
