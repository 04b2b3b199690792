"""W&B: a mirror of the metrics records and the run summary, on the main rank (`WandbCallback`), through
`WandbLogger`: offline by default (files under the run directory), online when configured.

The W&B run id is kept in the run directory, so a resumed run continues the same W&B run.

W&B is a mirror, never the record (metrics.jsonl and summary.json are): once the run has started,
an error from W&B (typically its service process gone: Slurm's SIGTERM on cancel or preemption
reaches every process of the job, `wandb-core` included, which then dies before the trainer's
checkpoint) prints one warning, turns W&B off for the rest of the attempt and never fails the run
or changes its exit code.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from pretrain.callbacks.base import Callback
from pretrain.config.schema import WandbConfig
from rundir.layout import RunDir


class WandbLogger:
    def __init__(self, cfg: WandbConfig, run_dir: Path, config: dict, resume: bool):
        self.run = None
        if cfg.mode == "disabled":
            return
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb  # deferred: imports wandb

        id_file = RunDir(run_dir).wandb_id
        if resume and id_file.exists():
            run_id = id_file.read_text().strip()
        else:
            run_id = secrets.token_hex(4)
            id_file.write_text(run_id + "\n")
        self.run = wandb.init(
            mode=cfg.mode,
            project=cfg.project,
            entity=cfg.entity,
            group=cfg.group,
            name=cfg.name or run_dir.name,
            tags=cfg.tags or None,
            config=config,
            dir=str(Path(run_dir).resolve()),  # absolute: a W&B service started earlier may have another cwd
            id=run_id,
            resume="allow",
            # no pip freeze or git probing at start-up: they cost seconds per run in a sweep
            settings=wandb.Settings(console="off", x_disable_stats=True, x_save_requirements=False, disable_git=True),
        )
        self.run_id = run_id

    def _lost(self, what: str, exc: BaseException) -> None:
        """W&B failed: say so once, drop it, and disarm its exit hook (it would print a traceback)."""
        self.run = None
        print(
            f"warning: W&B {what} failed ({type(exc).__name__}: {exc}); W&B logging is off for the rest of this "
            f"attempt. metrics.jsonl and summary.json hold every record (`wandb sync` uploads what W&B wrote)",
            file=sys.stderr,
            flush=True,
        )
        try:
            import wandb  # deferred: imports wandb

            wandb.teardown()
        except Exception:  # the service is gone: nothing left to tear down cleanly
            pass

    def log(self, metrics: dict, step: int) -> None:
        if self.run is not None:
            try:
                self.run.log({k: v for k, v in metrics.items() if v is not None}, step=step)
            except Exception as exc:
                self._lost("log", exc)

    def summary(self, values: dict) -> None:
        if self.run is not None:
            try:
                for k, v in values.items():
                    if isinstance(v, (int, float, str, bool)):
                        self.run.summary[k] = v
            except Exception as exc:
                self._lost("summary", exc)

    def finish(self, exit_code: int = 0) -> None:
        if self.run is not None:
            run, self.run = self.run, None
            try:
                run.finish(exit_code=exit_code)
            except Exception as exc:
                self._lost("finish", exc)


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
