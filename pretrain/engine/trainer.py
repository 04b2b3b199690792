"""The training loop, which only puts the parts in order (cf. torchtitan's `Trainer.train`,
OLMo-core's `Trainer.fit`): the train module runs each optimizer step (pretrain/engine/train_module.py),
callbacks do everything else (pretrain/callbacks/: checkpoints, metrics, W&B, console, evaluation,
probes, signals), and metrics recorded during a log window are reduced once per log step.

Everything that decides *what* a step does (data position, lr) is a pure function of the step,
so resume from a checkpoint reproduces an uninterrupted run exactly.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from models.accounting import model_counts
from pretrain.callbacks import Callback, CallbacksConfig, RunParts, StepInfo
from pretrain.callbacks.console import Progress
from pretrain.callbacks.signals import Signals
from pretrain.checkpoint import store as checkpoint
from pretrain.config.loader import dump_config
from pretrain.config.schema import TrainConfig
from pretrain.engine.distributed import DistInfo, name_peers
from pretrain.engine.prefetch import Prefetcher
from pretrain.engine.recorder import MetricRecorder
from pretrain.engine.train_module import DeepSpeedTrainModule, StepOutput
from pretrain.errors import TrainingFailed
from pretrain.feed.sampler import micro_batch_start
from pretrain.feed.train_feed import TrainFeed
from rundir.files import atomic_write_text
from rundir.layout import RunDir

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_STOPPED = 0, 1, 2, 3
# Checkpoints written before callbacks kept their own state hold it in these client-state keys.
LEGACY_STATE = {"noise_probe": "noise_scale"}


@dataclass
class TrainState:
    step: int = 0  # optimizer steps done
    wall_s: float = 0.0  # training wall time, over every attempt
    eval_s: float = 0.0  # of which evaluation (held-out, in-loop, probes): not training throughput
    paused_s: float = 0.0  # seconds outside training this attempt (checkpoints, evaluation)
    stop_reason: str | None = None  # a stop asked on this rank (e.g. "SIGTERM")
    stopping: bool = False  # the ranks agreed to stop after the current step
    lineage: dict | None = None  # a branch's {run, step}: the run and step it started from (train.init_from)


class Trainer:
    def __init__(
        self,
        cfg: TrainConfig,
        run_dir: Path,
        dist: DistInfo,
        prepared,
        callbacks=(),
        progress: bool = True,
        messages: bool = True,
        callbacks_config: CallbacksConfig | None = None,
    ):
        self.cfg, self.dist, self.prepared = cfg, dist, prepared
        self.rd = RunDir(run_dir)
        self.console = Progress(enabled=progress and dist.is_main, messages=messages and dist.is_main)
        self.total_steps = cfg.total_steps()
        self.counts = model_counts(cfg.model)
        self.state = TrainState()
        self.module = DeepSpeedTrainModule(cfg, dist, self.rd.checkpoints, self.log)
        self.recorder = MetricRecorder(dist.device, dist.world_size)
        self.signals = Signals()  # installed now: a signal during the build is not lost
        # which callbacks the run has (pretrain/callbacks/config.py); `callbacks`: more, given by the caller
        self.callbacks_config = callbacks_config or CallbacksConfig.from_config(cfg, extra=callbacks)
        self.callbacks: list[Callback] = []
        self.status, self.error, self.summary = "done", None, None
        self.resumed = False
        self._set_step(0)

    def log(self, text: str) -> None:
        if self.dist.is_main:
            self.console.message(text)

    def build(self) -> None:
        self.module.build()
        # Windows are read straight from the memory-mapped shards (feed/train_feed.py): nothing is loaded whole.
        self.feed = TrainFeed(self.prepared, self.cfg.model.seq_len, self.cfg.train.seed)
        # the next micro-batch is read (and pinned, on CUDA) while this one runs (pretrain/engine/prefetch.py)
        self.prefetch = Prefetcher(self._micro_batch, self.module.gas, self.total_steps, self.dist.device)
        # stable sort: callbacks of equal priority keep the order they were given in
        parts = RunParts(self.module, self.feed, self.counts, self.console, self.signals)
        self.callbacks = sorted(self.callbacks_config.build(parts), key=lambda cb: -cb.priority)
        for cb in self.callbacks:
            cb.attach(self)

    # -------------------------------------------------------------------- the loop
    def train(self) -> int:
        try:
            self._call("pre_train")  # the checkpointer resumes (or starts a branch from its parent) first
            self._warn_repetition()
            started, wall_before = time.perf_counter(), self.state.wall_s
            while self.state.step < self.total_steps and not self.state.stopping:
                self._set_step(self.state.step + 1)
                self._call("pre_step")
                out = self.module.train_batch(
                    self.state.step,
                    self.prefetch.get,
                    stop=self.state.stop_reason is not None,
                    timed=self.info.log_step,
                )
                self.state.step += 1
                self.state.wall_s = wall_before + (time.perf_counter() - started)
                self.state.stopping = out.stop
                self._record_step(out)
                self._call("post_train_batch", out)
                if self.info.log_step:
                    self._call("log_metrics", self.state.step, self._reduce_metrics())
                self._call("post_step")
            self.status = "done" if self.state.step >= self.total_steps else "preempted"
            self._call("post_train")  # the final (or preemption) checkpoint, then the summary
        except checkpoint.CheckpointLoadError as exc:  # never restart over a run whose checkpoints exist;
            self.status = "failed"  # nothing is written: the run directory stays as it was
            self.log(f"error: {exc}")
        except BaseException as exc:  # OOM, I/O errors...: recorded as failed, the last checkpoint kept
            known = isinstance(exc, TrainingFailed)
            self.status, self.error = "failed", str(exc) if known else f"{type(exc).__name__}: {exc}"
            self.error = name_peers(self.error, self.dist)  # a lost node: which one
            if known:
                self.log(f"error: {exc}")
            self._call("on_error", exc)
            if not known:
                raise
        finally:
            self.prefetch.close()
            self._call("close")
        return {"done": EXIT_OK, "preempted": EXIT_STOPPED}.get(self.status, EXIT_FAILED)

    def _call(self, hook: str, *args) -> None:
        for cb in self.callbacks:
            if hook in ("on_error", "close"):  # cleaning up after a failure: one callback's error must not hide it
                try:
                    getattr(cb, hook)(*args)
                except Exception as exc:
                    self.log(f"warning: {type(cb).__name__}.{hook} failed ({type(exc).__name__}: {exc})")
            else:
                getattr(cb, hook)(*args)

    def _micro_batch(self, step: int, micro: int):
        t, d = self.cfg.train, self.dist
        first = micro_batch_start(step, micro, d.rank, t.global_batch_size, t.micro_batch_size, d.world_size)
        return self.feed.sampler.batch(first, t.micro_batch_size)

    def _warn_repetition(self) -> None:
        steps, t = self.total_steps, self.cfg.train
        repeat = self.feed.repetition_warning(
            steps * self.cfg.tokens_per_step(), steps * t.global_batch_size, t.max_epochs_warn
        )
        if repeat:
            self.log(f"warning: {repeat}")

    # ------------------------------------------------------ what callbacks see and call
    @property
    def info(self) -> StepInfo:
        return self._info

    def _set_step(self, step: int) -> None:
        t, total = self.cfg.train, self.total_steps
        eval_step = step == total or bool(t.eval_every_steps and step % t.eval_every_steps == 0)
        self._info = StepInfo(
            step=step,
            total_steps=total,
            tokens=step * self.cfg.tokens_per_step(),
            run_dir=self.rd,
            config=self.cfg,
            is_main=self.dist.is_main,
            log=self.log,
            log_step=step > 0 and (step % t.log_every_steps == 0 or eval_step),
            eval_step=step > 0 and eval_step,
            resumed=self.resumed,
        )

    def record_metric(self, name: str, value, reduce: str = "mean") -> None:
        """Add a value to this log window's record (pretrain/engine/recorder.py: reduced once, on the log step)."""
        self.recorder.record(name, value, reduce)

    @contextmanager
    def paused(self, kind: str):
        """Time outside training (`eval`: also counted in eval_s; `checkpoint`): left out of tokens/s."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = time.perf_counter() - t0
            self.state.paused_s += dt
            if kind == "eval":
                self.state.eval_s += dt

    def request_stop(self, reason: str) -> None:
        """Stop after the current step once the ranks agree (checkpoint, `status: preempted`, exit 3)."""
        self.state.stop_reason = reason

    def checkpoint_saved(self, path: Path) -> None:
        self._call("post_checkpoint_saved", path)

    # ------------------------------------------------------------- metrics and state
    def _record_step(self, out: StepOutput) -> None:
        record = self.recorder.record
        record("loss", out.loss)  # every step: the record holds the window's mean
        if self.info.log_step:  # the others: the log step's own values
            record("lr", out.lr, "none")
            record("grad_norm", out.grad_norm, "none")
            record("skipped_steps", self.module.skipped_steps, "none")
            if out.aux_loss is not None:
                record("aux_loss", out.aux_loss)

    def _reduce_metrics(self) -> dict:
        step, tps, t = self.state.step, self.cfg.tokens_per_step(), self.cfg.train
        rec = {"step": step, "tokens": step * tps, "flops": step * tps * self.counts.flops_per_token}
        rec.update(self.recorder.reduce())
        rec["epoch"] = self.feed.epochs(step * tps)
        rec.update(self.feed.source_tokens(step * t.global_batch_size))
        return rec

    def state_dict(self) -> dict:
        """The checkpoint's client state: the loop's, the RNGs and every callback's own."""
        s = self.state
        states = {cb.name: cb.state_dict() for cb in self.callbacks if cb.name}
        return {
            "step": s.step,
            "tokens": s.step * self.cfg.tokens_per_step(),
            "wall_s": s.wall_s,
            "eval_s": s.eval_s,
            "skipped_steps": self.module.skipped_steps,
            "rng": checkpoint.rng_state(),
            "callbacks": {k: v for k, v in states.items() if v is not None},
            "init_from": s.lineage,
        }

    def load_state_dict(self, client: dict) -> None:
        s = self.state
        s.step, s.wall_s, s.eval_s = client["step"], client.get("wall_s", 0.0), client.get("eval_s", 0.0)
        self.module.skipped_steps = client.get("skipped_steps", 0)
        s.lineage = client.get("init_from")
        checkpoint.set_rng_state(client["rng"])
        states = dict(client.get("callbacks") or {})
        for old, new in LEGACY_STATE.items():
            if client.get(old) and new not in states:
                states[new] = client[old]
        if client.get("last_val") and "run_summary" not in states:
            states["run_summary"] = {"last_val": client["last_val"]}
        for cb in self.callbacks:
            if cb.name in states:
                cb.load_state_dict(states[cb.name])
        self.resumed = True
        self._set_step(s.step)

    def begin_branch(self, client: dict, parent: Path, step: int) -> None:
        """Start this run from its parent's checkpoint state (train.init_from): the parent's step,
        RNG, skipped steps and callback states carry over; wall and eval time start at zero (they
        count this run's own work), and the lineage is kept in every later checkpoint."""
        self.load_state_dict(client)
        self.state.wall_s = self.state.eval_s = 0.0
        self.state.lineage = {"run": str(Path(parent).resolve()), "step": int(step)}


def write_resolved_config(cfg: TrainConfig, run_dir: Path) -> None:

    atomic_write_text(RunDir(run_dir).config, dump_config(cfg))
