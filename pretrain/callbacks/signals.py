"""SIGTERM / SIGUSR1 (what Slurm sends before preemption) request a checkpoint and a clean exit.

The handler only asks the trainer to stop; the ranks agree on it in the step's one collective
(pretrain/engine/train_module.py), so every rank ends after the same step, and the checkpointer saves
it (summary `status: preempted`, exit 3). The handlers are installed when this callback is made
(with the trainer), so a signal that arrives while the model is being built is not lost.

Before that, a stop can come at any moment of the start-up (importing torch and DeepSpeed,
preparing data: seconds to minutes). `catch_early`, the first thing `scalelab train` does, turns
it into `StopBeforeTraining`, which `scalelab train` reports as stopped (exit 3): nothing was
trained in this attempt, so nothing is lost and a rerun starts or resumes the run. The launchers
also count a trainer killed by a signal they forwarded as stopped, for the few milliseconds
before Python runs `catch_early`.
"""

from __future__ import annotations

import signal

from pretrain.callbacks.base import Callback

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class StopBeforeTraining(BaseException):
    """A stop signal arrived before the trainer was built (BaseException: no `except Exception` swallows it)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.signal_name = name


def _stop_now(signum, frame) -> None:
    raise StopBeforeTraining(signal.Signals(signum).name)


def catch_early() -> None:
    """From now until the trainer installs its own handlers, a stop signal ends the start-up cleanly."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _stop_now)


class Signals(Callback):
    priority = 90

    def __init__(self, signals=STOP_SIGNALS):
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
