"""What is trained: the model, its optimizer and the DeepSpeed engine, and one optimizer step
over a step's micro-batches (cf. OLMo-core's TrainModule, torchtitan's train_step).

No host sync per micro-batch: losses stay on the device. One collective per step, before the
optimizer step, agrees over the ranks on three flags: a non-finite loss on some micro-batch (the
run stops; the step's update is never applied), a non-finite global gradient norm (ZeRO-0 fp32,
where we measure the norm: the update is skipped) and a stop request (SIGTERM/SIGUSR1 on some
rank). Every rank runs every micro-batch's backward whatever its loss, so no rank is left waiting
in another's gradient all-reduce.

Post-step hooks (`add_post_step_hook`) run on every rank after each optimizer step (also a skipped
one), before any callback: the MoE router controllers (pretrain/engine/moe_controllers.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch

from models.gpt import GPT
from pretrain.config.schema import TrainConfig
from pretrain.engine.distributed import DistInfo
from pretrain.engine.ds_config import build_ds_config, engine_zero_stage, grad_accum_steps
from pretrain.engine.step_timer import StepTimer
from pretrain.engine.tf32 import set_tf32
from pretrain.engine.zero_init import describe_shares, partitioned
from pretrain.errors import TrainingFailed
from rundir.schedules import lr_at

LossHook = Callable[[int, int, torch.Tensor], torch.Tensor]  # (step, micro, loss) -> loss, e.g. a test's fault
PostStepHook = Callable[[int, "StepOutput"], None]  # (step, out) after the optimizer step, e.g. router controllers


@dataclass
class StepOutput:
    loss: torch.Tensor  # mean training cross-entropy over this rank's micro-batches (float64, on the device)
    aux_loss: torch.Tensor | None  # the same mean of the summed router losses (MoE)
    router_stats: list[list[dict]] = field(default_factory=list)  # per micro-batch: `ModelOutput.router_stats`
    grad_norm: torch.Tensor | float | None = None  # global gradient norm before clipping (read on log steps)
    lr: float = 0.0
    skipped: bool = False  # the update was skipped for a non-finite gradient norm
    stop: bool = False  # some rank asked to stop after this step
    times: dict[str, float] | None = (
        None  # timed steps: seconds per phase and the whole step (pretrain/engine/step_timer.py)
    )


class DeepSpeedTrainModule:
    def __init__(self, cfg: TrainConfig, dist: DistInfo, checkpoints: Path, log: Callable[[str], None]):
        self.cfg, self.dist, self.log = cfg, dist, log
        self.checkpoints = checkpoints  # where the last good checkpoint is kept (named in failure messages)
        self.total_steps = cfg.total_steps()
        self.gas = grad_accum_steps(cfg, dist.world_size)
        self.skipped_steps = 0  # steps whose update was skipped for a non-finite gradient norm
        self._loss_hooks: list[LossHook] = []
        self._post_step_hooks: list[PostStepHook] = []

    def build(self) -> None:
        import deepspeed  # deferred: imports deepspeed

        cfg = self.cfg
        # before the first matmul; whether fp32 matmuls run in TF32 decides the MFU peak
        # (pretrain/callbacks/speed_monitor.py)
        self.tf32 = set_tf32(self.dist.device, cfg.train.tf32)
        torch.manual_seed(cfg.train.seed)
        ds_config = build_ds_config(cfg, self.dist.world_size, self.dist.device.type == "cuda")
        with partitioned(
            cfg, ds_config
        ):  # ZeRO-3: each rank allocates only its partitions (pretrain/engine/zero_init.py)
            model = GPT(cfg.model)
        if cfg.deepspeed.zero_stage == 3 and cfg.deepspeed.zero_init:
            self.log(describe_shares(model, self.dist.world_size, self.dist.device))
        model.set_activation_checkpointing(cfg.train.checkpoint_every())  # torch.utils.checkpoint, non-reentrant
        prepare = None
        if getattr(cfg.model, "moe", None) is not None:
            from pretrain.engine.expert_parallel import prepare_moe  # deferred: imports deepspeed, torch

            prepare = partial(prepare_moe, model, cfg.model.moe, self.dist.world_size)
        opt, self.optimizer_record = cfg.optim.build(
            model,
            cfg.peak_lr(),
            device=self.dist.device,
            rank=self.dist.rank,
            world_size=self.dist.world_size,
            zero_stage=cfg.deepspeed.zero_stage,
            prepare_groups=prepare,
            log=self.log,
        )
        self.engine, self.optimizer, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config)
        # Each group's lr multiplier (mup: pretrain/optim/adamw.py), taken from the config's groups before any
        # checkpoint is loaded; `train_batch` applies them to the schedule's lr every step.
        self.lr_mults = [g.get("lr_mult", 1.0) for g in self.optimizer.param_groups]
        self.model = self.engine.module
        if cfg.train.compile:  # in place (nn.Module.compile): parameter names and checkpoints are unchanged
            self.engine.compile(backend=cfg.train.compile_backend)
        engine_stage = engine_zero_stage(cfg)
        if self.dist.world_size == 1 and engine_stage == 0:
            # one plain data-parallel rank: DeepSpeed would still all-reduce every gradient through
            # the process group (~10% of a tiny model's step); there is nothing to reduce with
            self.engine.enable_backward_allreduce = False
        # DeepSpeed reports the global grad norm for ZeRO and fp16, not for ZeRO-0 with fp32
        # parameters (fp32, or bf16 autocast: pretrain/engine/ds_config.py), where it clips without
        # keeping the norm: measure it ourselves there.
        self.own_grad_norm = engine_stage == 0 and cfg.precision != "fp16"
        if getattr(cfg.model, "moe", None) is not None:
            from pretrain.engine.moe_controllers import attach_router_controllers  # deferred: imports torch

            attach_router_controllers(self)

    def add_post_step_hook(self, fn: PostStepHook) -> None:
        """`fn(step, out)` runs on every rank after each optimizer step (also a skipped one), before
        any callback sees the step: state that the step's forwards counted (router controllers)."""
        self._post_step_hooks.append(fn)

    def add_loss_hook(self, fn: LossHook) -> None:
        """`fn(step, micro, loss)` may replace each micro-batch's loss before backward (tests' faults)."""
        self._loss_hooks.append(fn)

    # ------------------------------------------------------------------ a step
    def train_batch(
        self, step: int, micro_batch: Callable[[int, int], tuple], stop: bool = False, timed: bool = False
    ) -> StepOutput:
        """Optimizer step `step` (0-based) over `micro_batch(step, i)` for i < grad-accumulation steps;
        `stop`: this rank asks to stop after the step (agreed with the others); `timed`: measure the
        phases (log steps; on CUDA this synchronizes the device at each phase boundary)."""
        d, gas = self.dist, self.gas
        timer = StepTimer(d.device, timed)
        lr = lr_at(step, self.total_steps, self.cfg.peak_lr(), self.cfg.schedule)
        for g, mult in zip(self.optimizer.param_groups, self.lr_mults, strict=True):
            g["lr"] = lr * mult
        loss_sum = aux_sum = checked = None
        stats, dropped = [], False
        for micro in range(gas):
            with timer.phase("data"):
                x, y = micro_batch(step, micro)
                # no-ops when already there (the trainer's prefetcher copies from pinned memory, non-blocking)
                x, y = x.to(d.device, non_blocking=True), y.to(d.device, non_blocking=True)
            with timer.phase("fwd_bwd"):
                out = self.engine(x, targets=y, logits=False)
                loss = out.loss if out.aux_loss is None else out.loss + out.aux_loss
                for hook in self._loss_hooks:
                    loss = hook(step, micro, loss)
                v = loss.detach().double()  # float64: a sum of finite float32 losses stays finite
                checked = v if checked is None else checked + v
                self.engine.backward(loss)
            with timer.phase("optim"):  # the gradient-norm check, the step's collective and the update
                if micro == gas - 1:
                    norm = _total_norm(self.model) if self.own_grad_norm else None
                    bad_loss, dropped, stop = self._agree(checked, norm, stop)
                    if bad_loss:
                        local = checked.item()
                        value = local if not math.isfinite(local) else "on another rank"
                        raise TrainingFailed(
                            f"non-finite loss ({value}) at step {step + 1}; stopped without saving. "
                            f"The last good checkpoint is kept in {self.checkpoints}"
                        )
                with _no_update(self.engine.optimizer) if dropped else nullcontext():
                    self.engine.step()  # still run: DeepSpeed's step bookkeeping and zero_grad
            part = out.loss.detach().double() / gas
            loss_sum = part if loss_sum is None else loss_sum + part
            if out.aux_loss is not None:
                part = out.aux_loss.detach().double() / gas
                aux_sum = part if aux_sum is None else aux_sum + part
            if out.router_stats:
                stats.append(out.router_stats)
        skipped = self._update_skipped(dropped)
        if skipped:
            self._on_skipped(step)
        grad_norm = norm if self.own_grad_norm else self.engine.get_global_grad_norm()
        out = StepOutput(loss_sum, aux_sum, stats, grad_norm, lr, skipped, stop, timer.result())
        for hook in self._post_step_hooks:
            hook(step, out)
        return out

    def _agree(self, checked: torch.Tensor, norm: torch.Tensor | None, stop: bool) -> tuple[bool, bool, bool]:
        """(non-finite loss, non-finite gradient norm, stop) on any rank: the step's one collective
        and its one host sync. ZeRO-0 fp32 hands the step to a plain torch optimizer, which would
        apply inf/NaN: its norm is checked here, on every rank (expert gradients are local)."""
        flags = torch.stack(
            [
                (~torch.isfinite(checked)).double(),
                (~torch.isfinite(norm)).double()
                if norm is not None
                else torch.zeros((), dtype=torch.float64, device=checked.device),
                torch.full((), float(stop), dtype=torch.float64, device=checked.device),
            ]
        )
        if self.dist.world_size > 1 and torch.distributed.is_initialized():
            torch.distributed.all_reduce(flags, op=torch.distributed.ReduceOp.MAX)
        bad_loss, bad_norm, stop = (x > 0 for x in flags.tolist())
        return bad_loss, bad_norm, stop

    def _update_skipped(self, dropped: bool) -> bool:
        """Whether this step's update was skipped for a non-finite gradient norm.

        ZeRO >= 1 and bf16/fp16: DeepSpeed's optimizer checks the global norm before stepping and
        skips the update (`was_step_applied`); ZeRO-0 fp32 was checked before the step by `_agree`."""
        if self.own_grad_norm:
            return dropped
        if self.engine.was_step_applied():
            norm = _grad_norm(self.engine)
            if norm is not None and not math.isfinite(norm):
                raise TrainingFailed(
                    f"non-finite gradient norm ({norm}) was applied by the optimizer; stopped without saving. "
                    f"The last good checkpoint is kept in {self.checkpoints}"
                )
            return False
        return True

    def _on_skipped(self, step: int) -> None:
        cfg = self.cfg.train
        self.skipped_steps += 1
        if self.cfg.precision == "fp16":  # dynamic loss scaling skips overflowing steps by design
            return
        n = self.skipped_steps
        if cfg.nonfinite_grad == "stop" or n > cfg.max_skipped_steps:
            why = (
                "train.nonfinite_grad is stop"
                if cfg.nonfinite_grad == "stop"
                else f"more than train.max_skipped_steps={cfg.max_skipped_steps}"
            )
            raise TrainingFailed(
                f"non-finite gradient norm at step {step + 1} ({n} skipped, {why}); stopped without saving. "
                f"The last good checkpoint is kept in {self.checkpoints}"
            )
        self.log(f"warning: non-finite gradient norm at step {step + 1}: update skipped ({n} skipped so far)")


@contextmanager
def _no_update(optimizer):
    """The optimizer's step does nothing (weights, moments and step counts stay as they were)."""
    optimizer.step = lambda *args, **kwargs: None  # shadows the method on this instance only
    try:
        yield
    finally:
        del optimizer.step


def _total_norm(model) -> torch.Tensor:
    """Global L2 norm of the (already all-reduced) gradients, before clipping; stays on the device."""
    norms = [p.grad.detach().float().norm() for p in model.parameters() if p.grad is not None]
    if not norms:
        return torch.zeros((), device=next(model.parameters()).device)
    return torch.linalg.vector_norm(torch.stack(norms))


def _grad_norm(engine) -> float | None:
    g = engine.get_global_grad_norm()
    if g is None:
        return None
    return float(g.item() if torch.is_tensor(g) else g)
