"""The training loop: a DeepSpeed engine over a `models.GPT`, step-indexed data and schedules.

Everything that decides *what* a step does (data position, lr) is a pure function of the step,
so resume from a checkpoint reproduces an uninterrupted run exactly.
"""
from __future__ import annotations

import math
import os
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch

from models.accounting import count
from models.gpt import GPT
from pretrain import checkpoint
from pretrain.config.loader import dump_config
from pretrain.config.schema import TrainConfig
from pretrain.console import Progress
from pretrain.distributed import DistInfo, all_reduce_max, all_reduce_mean, barrier
from pretrain.ds_config import build_ds_config, grad_accum_steps
from pretrain.errors import TrainingFailed
from pretrain.data.feed import TrainFeed
from pretrain.evaluation import HeldOutEval
from runs.metrics import MetricsFile
from pretrain.mfu import device_peak
from pretrain.optim import param_groups
from runs.layout import RunDir
from pretrain.sampler import micro_batch_start
from runs.schedules import lr_at
from pretrain.signals import StopRequest
from pretrain.wandb_logger import WandbLogger

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_STOPPED = 0, 1, 2, 3


@dataclass
class TrainState:
    step: int = 0
    wall_s: float = 0.0  # training wall time accumulated over earlier attempts
    eval_s: float = 0.0
    last_val: dict = field(default_factory=dict)
    skipped_steps: int = 0  # steps whose update was skipped for a non-finite gradient norm


class Trainer:
    def __init__(self, cfg: TrainConfig, run_dir: Path, dist: DistInfo, prepared, callbacks=(), progress: bool = True):
        self.cfg, self.dist, self.prepared = cfg, dist, prepared
        self.rd = RunDir(run_dir)
        self.callbacks = list(callbacks)
        self.progress = Progress(enabled=progress and dist.is_main, messages=dist.is_main)
        self.total_steps = cfg.total_steps()
        self.gas = grad_accum_steps(cfg, dist.world_size)
        self.counts = count(cfg.model)
        self.state = TrainState()
        self.stop = StopRequest()
        self.noise_probe = None
        self.paused_s = 0.0  # time spent outside training steps (checkpoints, probes), excluded from tokens/s
        if cfg.train.noise_scale_every_steps:
            from pretrain.noise_scale import GradNoiseProbe

            self.noise_probe = GradNoiseProbe()

    # ----------------------------------------------------------------- set-up
    def _log(self, text: str) -> None:
        if self.dist.is_main:
            self.progress.message(text)

    def build(self) -> None:
        import deepspeed

        cfg = self.cfg
        torch.manual_seed(cfg.train.seed)
        model = GPT(cfg.model)
        groups = param_groups(model, cfg.optim)
        if getattr(cfg.model, "moe", None) is not None:
            from pretrain.expert_parallel import prepare_moe

            groups = prepare_moe(model, cfg.model.moe, self.dist.world_size, groups)
        if cfg.train.compile:
            model = torch.compile(model)
        # fused kernels on GPU; multi-tensor (foreach) updates on CPU, much faster than the per-tensor loop
        fused = {"fused": True} if self.dist.device.type == "cuda" else {"foreach": True}
        opt = torch.optim.AdamW(groups, lr=cfg.peak_lr(), betas=(cfg.optim.beta1, cfg.optim.beta2), eps=cfg.optim.eps, **fused)
        self.engine, self.optimizer, _, _ = deepspeed.initialize(
            model=model, optimizer=opt, config=build_ds_config(cfg, self.dist.world_size)
        )
        self.model = self.engine.module
        if self.dist.world_size == 1 and cfg.deepspeed.zero_stage == 0:
            # one plain data-parallel rank: DeepSpeed would still all-reduce every gradient through
            # the process group (~10% of a tiny model's step); there is nothing to reduce with
            self.engine.enable_backward_allreduce = False
        self._step_hooks = [m.after_optimizer_step for m in self.model.modules() if hasattr(m, "after_optimizer_step")]
        # DeepSpeed reports the global grad norm for ZeRO and fp16, not for ZeRO-0 with fp32
        # parameters (fp32, or bf16 autocast: pretrain/ds_config.py), where it clips without
        # keeping the norm: measure it ourselves there.
        self.own_grad_norm = cfg.deepspeed.zero_stage == 0 and cfg.precision != "fp16"
        self.last_grad_norm = None
        # Windows are read straight from the memory-mapped shards (data/feed.py): nothing is loaded whole.
        self.feed = TrainFeed(self.prepared, cfg.model.seq_len, cfg.train.seed)
        self.sampler = self.feed.sampler
        self.heldout = HeldOutEval(self.feed.val_parts, cfg.model.seq_len, cfg.train.eval_tokens, None, cfg.train.micro_batch_size)
        self.peak, self.peak_source = device_peak(self.dist.device, cfg.precision, cfg.train.device_peak_flops)
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.precision)
        self.eval_autocast = torch.autocast(self.dist.device.type, dtype=dtype) if dtype else None

    def resume(self) -> bool:
        d = self.dist
        client = checkpoint.load_latest(self.engine, self.rd.checkpoints, self._log, world_size=d.world_size,
                                        is_main=d.is_main, agree=lambda ok: all_reduce_max(0.0 if ok else 1.0, d) == 0)
        if client is None:
            return False
        self.state.step = client["step"]
        self.state.wall_s = client.get("wall_s", 0.0)
        self.state.eval_s = client.get("eval_s", 0.0)
        self.state.last_val = client.get("last_val", {})
        self.state.skipped_steps = client.get("skipped_steps", 0)
        checkpoint.set_rng_state(client["rng"])
        if self.noise_probe is not None and client.get("noise_probe"):
            self.noise_probe.load_state_dict(client["noise_probe"])
        self._log(f"resumed from checkpoint step_{self.state.step} ({self.state.step}/{self.total_steps} steps done)")
        return True

    # ------------------------------------------------------------------- loop
    def _set_lr(self, lr: float) -> None:
        for g in self.optimizer.param_groups:
            g["lr"] = lr

    def _after_step_hooks(self) -> None:
        for fn in self._step_hooks:  # e.g. the aux-free router's bias update
            fn()

    def _save(self) -> Path:
        client = {
            "step": self.state.step,
            "tokens": self.state.step * self.cfg.tokens_per_step(),
            "wall_s": self.state.wall_s,
            "eval_s": self.state.eval_s,
            "last_val": self.state.last_val,
            "skipped_steps": self.state.skipped_steps,
            "rng": checkpoint.rng_state(),
            "noise_probe": self.noise_probe.state_dict() if self.noise_probe is not None else None,
        }
        if all_reduce_max(0.0 if checkpoint.weights_finite(self.model) else 1.0, self.dist) > 0:
            raise TrainingFailed(
                f"non-finite weights at step {self.state.step}; not saved. The last good checkpoint is kept in {self.rd.checkpoints}"
            )
        t0 = time.perf_counter()
        path = checkpoint.save(
            self.engine, self.rd.checkpoints, self.state.step, client, self.cfg.train.keep_checkpoints,
            self.dist.is_main, lambda: barrier(self.dist), world_size=self.dist.world_size,
            agree=lambda ok: all_reduce_max(0.0 if ok else 1.0, self.dist) == 0,
        )
        for cb in self.callbacks:
            if hasattr(cb, "on_checkpoint"):
                cb.on_checkpoint(self, self.state.step, path)
        self.paused_s += time.perf_counter() - t0  # checkpoints and in-loop evals are not training time
        return path

    def _own_norm_nonfinite(self) -> bool:
        """ZeRO-0 fp32 hands the step to a plain torch optimizer, which would apply inf/NaN: check
        the global gradient norm here, before the step (on every rank: expert grads are local)."""
        return all_reduce_max(0.0 if math.isfinite(self.last_grad_norm) else 1.0, self.dist) > 0

    def _update_skipped(self, dropped: bool) -> bool:
        """Whether this step's update was skipped for a non-finite gradient norm.

        ZeRO >= 1 and bf16/fp16: DeepSpeed's optimizer checks the global norm before stepping and
        skips the update (`was_step_applied`); ZeRO-0 fp32 is checked before the step by `_own_norm_nonfinite`."""
        if self.own_grad_norm:
            return dropped
        if self.engine.was_step_applied():
            norm = _grad_norm(self.engine)
            if norm is not None and not math.isfinite(norm):
                raise TrainingFailed(f"non-finite gradient norm ({norm}) was applied by the optimizer; stopped without saving. "
                                     f"The last good checkpoint is kept in {self.rd.checkpoints}")
            return False
        return True

    def _on_skipped(self, step: int) -> None:
        cfg = self.cfg.train
        self.state.skipped_steps += 1
        if self.cfg.precision == "fp16":  # dynamic loss scaling skips overflowing steps by design
            return
        n = self.state.skipped_steps
        if cfg.nonfinite_grad == "stop" or n > cfg.max_skipped_steps:
            why = "train.nonfinite_grad is stop" if cfg.nonfinite_grad == "stop" else f"more than train.max_skipped_steps={cfg.max_skipped_steps}"
            raise TrainingFailed(
                f"non-finite gradient norm at step {step + 1} ({n} skipped, {why}); stopped without saving. "
                f"The last good checkpoint is kept in {self.rd.checkpoints}"
            )
        self._log(f"warning: non-finite gradient norm at step {step + 1}: update skipped ({n} skipped so far)")

    def _measure_noise(self, step: int) -> dict:
        """Gradient noise scale from this step's samples (rank-local; outside DeepSpeed's buffers).

        Its time counts as evaluation time, not training throughput."""
        t0 = time.perf_counter()
        mb, k = self.cfg.train.micro_batch_size, self.cfg.train.noise_scale_batches
        first = micro_batch_start(step, 0, self.dist.rank, self.cfg.train.global_batch_size, mb, self.dist.world_size)
        batches = []
        for j in range(k):
            x, y = self.sampler.batch(first + j * mb, mb)
            batches.append((x.to(self.dist.device), y.to(self.dist.device)))
        out = self.noise_probe.measure(self.model, batches)
        self.state.eval_s += time.perf_counter() - t0
        self.paused_s += time.perf_counter() - t0
        return {k: v for k, v in out.items() if k in ("grad_noise_scale", "grad_noise_scale_raw")}

    def _evaluate(self) -> dict:
        t0 = time.perf_counter()
        res = self.heldout.run(self.model, self.dist.device, self.dist.rank, self.dist.world_size, self.eval_autocast)
        self.state.eval_s += time.perf_counter() - t0
        self.state.last_val = res
        return res

    def train(self) -> int:
        cfg, d = self.cfg, self.dist
        try:
            resumed = self.resume()
        except checkpoint.CheckpointLoadError as exc:  # never restart over a run whose checkpoints exist
            self._log(f"error: {exc}")
            return EXIT_FAILED
        metrics = MetricsFile(self.rd.metrics, self.state.step if resumed else None) if d.is_main else None
        wb = WandbLogger(cfg.wandb, self.rd.path, cfg.model_dump(mode="json"), resumed) if d.is_main else None
        tps = cfg.tokens_per_step()
        repeat = self.feed.repetition_warning(self.total_steps * tps, self.total_steps * cfg.train.global_batch_size,
                                              cfg.train.max_epochs_warn)
        if repeat:
            self._log(f"warning: {repeat}")
        fault_nan = int(os.environ.get("SCALELAB_FAULT_NAN_STEP", "-1"))  # test hook: poison this step's loss
        fault_inf = int(os.environ.get("SCALELAB_FAULT_INF_GRAD_STEP", "-1"))  # test hook: this step's gradients inf
        window_t0, window_tokens, window_loss, window_n = time.perf_counter(), 0, 0.0, 0
        window_paused = self.paused_s
        noise: dict = {}
        attempt_t0 = time.perf_counter()
        wall_before = self.state.wall_s
        status, error, code = "done", None, EXIT_OK
        try:
            while self.state.step < self.total_steps:
                step = self.state.step
                lr = lr_at(step, self.total_steps, cfg.peak_lr(), cfg.schedule)
                self._set_lr(lr)
                step_loss, aux_total, stats, finite, dropped = 0.0, 0.0, [], True, False
                for micro in range(self.gas):
                    first = micro_batch_start(step, micro, d.rank, cfg.train.global_batch_size, cfg.train.micro_batch_size, d.world_size)
                    x, y = self.sampler.batch(first, cfg.train.micro_batch_size)
                    out = self.engine(x.to(d.device), targets=y.to(d.device), logits=False)
                    loss = out.loss if out.aux_loss is None else out.loss + out.aux_loss
                    if step == fault_nan:
                        loss = loss * float("nan")
                    loss_val = loss.item()
                    # Every rank must agree before backward, or the others would hang in its all-reduce.
                    if all_reduce_max(0.0 if math.isfinite(loss_val) else 1.0, d) > 0:
                        finite, step_loss = False, loss_val
                        break  # never step on a non-finite loss: the weights stay as they were
                    if step == fault_inf and micro == 0:
                        loss.register_hook(lambda g: g * float("inf"))  # the loss stays finite, its gradients do not
                    self.engine.backward(loss)
                    if micro == self.gas - 1 and self.own_grad_norm:
                        self.last_grad_norm = _total_norm(self.model)
                        dropped = self._own_norm_nonfinite()
                    with _no_update(self.engine.optimizer) if dropped else nullcontext():
                        self.engine.step()  # still run: DeepSpeed's step bookkeeping and zero_grad
                    step_loss += out.loss.item() / self.gas
                    if out.aux_loss is not None:
                        aux_total += out.aux_loss.item() / self.gas
                    stats = out.router_stats
                if not finite:
                    raise TrainingFailed(
                        f"non-finite loss ({step_loss}) at step {step + 1}; stopped without saving. "
                        f"The last good checkpoint is kept in {self.rd.checkpoints}"
                    )
                if self._update_skipped(dropped):
                    self._on_skipped(step)
                self._after_step_hooks()
                if self.noise_probe is not None and (step + 1) % cfg.train.noise_scale_every_steps == 0:
                    noise = self._measure_noise(step)
                self.state.step = step = step + 1
                window_tokens += tps
                window_loss += step_loss
                window_n += 1
                now = time.perf_counter()
                self.state.wall_s = wall_before + (now - attempt_t0)
                do_eval = step == self.total_steps or (cfg.train.eval_every_steps and step % cfg.train.eval_every_steps == 0)
                do_log = step % cfg.train.log_every_steps == 0 or do_eval or step == self.total_steps
                if do_log:
                    elapsed = max(1e-9, now - window_t0 - (self.paused_s - window_paused))
                    tok_s = window_tokens / elapsed
                    rec = {
                        "step": step,
                        "tokens": step * tps,
                        "flops": step * tps * self.counts.flops_per_token,
                        "loss": all_reduce_mean(window_loss / window_n, d),
                        "lr": lr,
                        "grad_norm": self.last_grad_norm if self.own_grad_norm else _grad_norm(self.engine),
                        "tokens_per_s": tok_s,
                        "mfu": self.counts.flops_per_token * tok_s / (self.peak * d.world_size),
                        "epoch": self.feed.epochs(step * tps),
                        "eta_s": (self.total_steps - step) * elapsed / window_n,
                        "wall_s": self.state.wall_s,
                        "skipped_steps": self.state.skipped_steps,
                    }
                    rec.update(self.feed.source_tokens(step * cfg.train.global_batch_size))
                    if aux_total:
                        rec["aux_loss"] = all_reduce_mean(aux_total, d)
                    if noise:  # in the record after the measurement only: a resumed run has no older one
                        rec.update(noise)
                        noise = {}
                    extra = ""
                    if stats:
                        from models.moe.metrics import console_summary, summarize

                        moe = summarize(stats)
                        rec.update(moe)
                        extra = console_summary(moe)
                    if do_eval:
                        rec.update(self._evaluate())
                    if d.is_main:
                        metrics.write(rec)
                        wb.log(rec, step)
                        self.progress.update(rec, self.total_steps, extra)
                    window_t0, window_tokens, window_loss, window_n = time.perf_counter(), 0, 0.0, 0
                    window_paused = self.paused_s
                if step == self.total_steps:
                    break
                stop = all_reduce_max(1.0 if self.stop.requested else 0.0, d) > 0
                if stop:
                    self._save()
                    self._log(f"received {self.stop.name or 'stop signal'}: checkpoint step_{step} saved; rerun the same command to resume")
                    status, code = "preempted", EXIT_STOPPED
                    break
                if cfg.train.checkpoint_every_steps and step % cfg.train.checkpoint_every_steps == 0:
                    self._save()
            if status == "done":
                self._save()
        except TrainingFailed as exc:
            status, error, code = "failed", str(exc), EXIT_FAILED
            self._log(f"error: {exc}")
        except Exception as exc:  # OOM, I/O errors...: record the failure, keep the last checkpoint, re-raise
            status, error, code = "failed", f"{type(exc).__name__}: {exc}", EXIT_FAILED
            raise
        finally:
            summary = self.summary(status, error)
            if d.is_main:
                try:
                    if metrics:
                        metrics.close()
                    self.rd.write_summary(summary)
                except OSError as exc:  # a full disk: the message above matters more than a traceback
                    self._log(f"warning: metrics.jsonl or summary.json could not be written ({exc})")
                if wb:
                    wb.summary({k: v for k, v in summary.items() if k.startswith(("final_", "params", "tokens", "flops"))})
                    wb.finish(exit_code=0 if status != "failed" else 1)
            for cb in self.callbacks:
                if hasattr(cb, "on_end"):
                    cb.on_end(self, summary)
        if d.is_main and status == "done":
            self._log(
                f"done: {summary['steps']} steps, {summary['tokens']:,} tokens, final loss {summary['final_loss']:.4f}, "
                f"val loss {summary['final_val_loss']:.4f}, {summary['wall_s']:.1f}s -> {self.rd.path}"
            )
        return code

    def summary(self, status: str, error: str | None) -> dict:
        from runs.metrics import read_metrics

        cfg, c, step = self.cfg, self.counts, self.state.step
        recs = read_metrics(self.rd.metrics) if self.dist.is_main else []
        last = recs[-1] if recs else {}
        train_wall = max(1e-9, self.state.wall_s - self.state.eval_s)
        out = {
            "status": status,
            "name": cfg.name,
            "steps": step,
            "total_steps": self.total_steps,
            "tokens": step * cfg.tokens_per_step(),
            "params": c.total,
            "non_embedding_params": c.non_embedding,
            "active_params": c.active,
            "active_non_embedding_params": c.active_non_embedding,
            "flops_per_token": c.flops_per_token,
            "flops": step * cfg.tokens_per_step() * c.flops_per_token,
            "batch_tokens": cfg.tokens_per_step(),
            "batch_size": cfg.train.global_batch_size,
            "lr": cfg.optim.lr,  # as configured (with optim.width_lr_ref: the reference width's lr)
            "peak_lr": cfg.peak_lr(),
            "final_loss": last.get("loss"),
            "final_val_loss": self.state.last_val.get("val_loss"),
            "final_val_bpb": self.state.last_val.get("val_bpb"),
            "tokens_per_s": step * cfg.tokens_per_step() / train_wall if step else None,
            "mfu": last.get("mfu"),
            "peak_flops": self.peak,
            "peak_source": self.peak_source,
            "world_size": self.dist.world_size,
            "threads": torch.get_num_threads(),  # per rank; pin train.threads to resume bit-exactly elsewhere
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "wall_s": self.state.wall_s,
            "eval_s": self.state.eval_s,
            "skipped_steps": self.state.skipped_steps,
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "extras": cfg.extras,
        }
        out.update(self.feed.summary(step * cfg.tokens_per_step(), step * cfg.train.global_batch_size))
        if error:
            out["error"] = error
        return out


@contextmanager
def _no_update(optimizer):
    """The optimizer's step does nothing (weights, moments and step counts stay as they were)."""
    optimizer.step = lambda *args, **kwargs: None  # shadows the method on this instance only
    try:
        yield
    finally:
        del optimizer.step


def _total_norm(model) -> float:
    """Global L2 norm of the (already all-reduced) gradients, before clipping."""
    norms = [p.grad.detach().float().norm() for p in model.parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack(norms))) if norms else 0.0


def _grad_norm(engine) -> float | None:
    g = engine.get_global_grad_norm()
    if g is None:
        return None
    return float(g.item() if torch.is_tensor(g) else g)


def write_resolved_config(cfg: TrainConfig, run_dir: Path) -> None:
    from runs.files import atomic_write_text

    atomic_write_text(RunDir(run_dir).config, dump_config(cfg))
