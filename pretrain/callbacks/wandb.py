"""W&B mirror of the metrics records and the run summary, on the main rank (pretrain/wandb_logger.py:
offline by default, the same W&B run continued on resume, never fails the run)."""

from __future__ import annotations

from pretrain.callbacks.base import Callback
from pretrain.wandb_logger import WandbLogger

SUMMARY_PREFIXES = ("final_", "params", "tokens", "flops")


class WandbCallback(Callback):
    priority = 20  # after SummaryFileWriter in post_train/on_error: the W&B summary is the run summary's

    def __init__(self):
        self.wb: WandbLogger | None = None

    def pre_train(self) -> None:
        info = self.info
        if info.is_main:
            self.wb = WandbLogger(
                info.config.wandb, info.run_dir.path, info.config.model_dump(mode="json"), info.resumed
            )

    def log_metrics(self, step: int, rec: dict) -> None:
        if self.wb is not None:
            self.wb.log(rec, step)

    def _finish(self) -> None:
        if self.wb is None:
            return
        summary = self.trainer.summary or {}
        self.wb.summary({k: v for k, v in summary.items() if k.startswith(SUMMARY_PREFIXES)})
        self.wb.finish(exit_code=1 if self.trainer.status == "failed" else 0)
        self.wb = None

    def post_train(self) -> None:
        self._finish()

    def on_error(self, exc: BaseException) -> None:
        self._finish()
