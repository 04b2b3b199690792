"""SIGTERM / SIGUSR1 (what Slurm sends before preemption) request a checkpoint and a clean exit.

The handler only asks the trainer to stop; the ranks agree on it in the step's one collective
(pretrain/train_module.py), so every rank ends after the same step, and the checkpointer saves
it (summary `status: preempted`, exit 3). Handlers are installed when this callback is made, so
a signal that arrives while the run is still being built is not lost.
"""
from __future__ import annotations

import signal

from pretrain.callbacks.base import Callback


class Signals(Callback):
    priority = 90

    def __init__(self, signals=(signal.SIGTERM, signal.SIGUSR1)):
        self.received: str | None = None
        for sig in signals:
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame) -> None:
        self.received = signal.Signals(signum).name
        if self.trainer is not None:
            self.trainer.request_stop(self.received)

    def pre_train(self) -> None:
        if self.received:
            self.trainer.request_stop(self.received)
