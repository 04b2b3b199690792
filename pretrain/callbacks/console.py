"""The console progress line of each metrics record (pretrain/console.py), with the MoE router
summary when there is one."""

from __future__ import annotations

from models.moe.metrics import console_summary
from pretrain.callbacks.base import Callback


class ConsoleLogger(Callback):
    priority = 10

    def __init__(self, progress):
        self.progress = progress

    def log_metrics(self, step: int, rec: dict) -> None:
        if self.info.is_main:
            self.progress.update(rec, self.info.total_steps, console_summary(rec))

    def close(self) -> None:
        self.progress.close()
