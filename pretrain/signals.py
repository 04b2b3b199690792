"""SIGTERM / SIGUSR1 (what Slurm sends before preemption) request a checkpoint and a clean exit."""
from __future__ import annotations

import signal


class StopRequest:
    def __init__(self):
        self.signum: int | None = None
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame) -> None:
        self.signum = signum

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""
