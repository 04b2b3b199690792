"""metrics.jsonl: one record per log step, on the main rank (rundir/metrics.py drops the
records past the checkpoint on resume, so the file reads as one clean run)."""

from __future__ import annotations

from pretrain.callbacks.base import Callback
from rundir.metrics import MetricsFile


class MetricsFileWriter(Callback):
    priority = 30

    def __init__(self):
        self.file: MetricsFile | None = None

    def pre_train(self) -> None:
        info = self.info
        if info.is_main:
            self.file = MetricsFile(info.run_dir.metrics, info.step if info.resumed else None)

    def log_metrics(self, step: int, rec: dict) -> None:
        if self.file is not None:
            self.file.write(rec)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
