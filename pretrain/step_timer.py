"""Seconds spent in each phase of an optimizer step (data, forward+backward, optimizer), summed
over the step's micro-batches, on the steps that are logged.

Off (every other step) it only enters empty context managers. On, a CUDA run synchronizes the
device at each phase boundary, so the GPU work a phase queued is charged to it rather than to the
next host sync; those syncs happen on log steps only, so the steps in between keep the GPU fed.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

import torch

PHASES = ("data", "fwd_bwd", "optim")


class StepTimer:
    def __init__(self, device: torch.device, enabled: bool):
        self.enabled, self.sync = enabled, enabled and device.type == "cuda"
        self.seconds = dict.fromkeys(PHASES, 0.0)
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
        """{phase: seconds, "step": the whole step's seconds}, or None when not timed."""
        if not self.enabled:
            return None
        return {**self.seconds, "step": time.perf_counter() - self._t0}
