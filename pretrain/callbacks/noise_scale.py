"""The gradient noise scale probe (`GradNoiseProbe`, below) every `train.noise_scale_every_steps`,
on the step's own first micro-batches; its EMAs are checkpointed (`state_dict`) and its time counts
as evaluation. The values appear in the first metrics record after a measurement.

The probe (McCandlish et al. 2018, "An Empirical Model of Large-Batch
Training", App. A.1): the critical batch size a batch-size sweep is looking for, measured in-run.

From k micro-batches of B_small tokens each, the squared gradient norms at two batch sizes are
  |G_small|^2 = mean_i |g_i|^2           (B_small = tokens per micro-batch)
  |G_big|^2   = |mean_i g_i|^2           (B_big = k * B_small)
and the unbiased estimates of the true squared gradient norm and the per-token covariance trace
  |G|^2  = (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
  tr(S)  = (|G_small|^2 - |G_big|^2) / (1/B_small - 1/B_big)
are smoothed with separate (bias-corrected) EMAs; B_simple = EMA[tr S] / EMA[|G|^2], in tokens.
A single measurement's ratio is very noisy (|G|^2 estimates can be negative); only the ratio of
the EMAs is meaningful, which is why both are kept and checkpointed (`state_dict`).

Runs on the unwrapped torch model with `torch.autograd.grad`, so it never touches `.grad`, the
optimizer or DeepSpeed's buffers; every module buffer (an MoE router's aux-free selection bias and
the load it counts for its next update) and the RNG are restored afterwards, so a probe changes
nothing a checkpoint or the next step sees: exact resume holds when a probe step meets a checkpoint.
Config: `train.noise_scale_every_steps` (0 = off),
`train.noise_scale_batches` (k, default 4).
"""

from __future__ import annotations

import math

import torch

from pretrain.callbacks.base import Callback
from pretrain.feed.sampler import micro_batch_start

LOGGED = ("grad_noise_scale", "grad_noise_scale_raw")


class NoiseScale(Callback):
    name = "noise_scale"
    priority = 70  # after the MoE bias update (the probe restores every buffer it touches)

    def __init__(self, module, sampler):
        self.module, self.sampler = module, sampler
        self.probe = GradNoiseProbe()
        self.pending: dict = {}  # a measurement not yet in a record (not checkpointed: a resumed run has none)

    def post_train_batch(self, out) -> None:
        info, t = self.info, self.module.cfg.train
        if info.step % t.noise_scale_every_steps == 0:
            with self.trainer.paused("eval"):
                self.pending = {k: v for k, v in self._measure(info.step - 1).items() if k in LOGGED}
        if info.log_step and self.pending:
            for k, v in self.pending.items():
                self.trainer.record_metric(k, v, reduce="none")  # rank-local, as measured
            self.pending = {}

    def _measure(self, step: int) -> dict:
        """From this step's samples (rank-local; outside DeepSpeed's buffers)."""
        d, t = self.module.dist, self.module.cfg.train
        mb = t.micro_batch_size
        first = micro_batch_start(step, 0, d.rank, t.global_batch_size, mb, d.world_size)
        batches = []
        for j in range(t.noise_scale_batches):
            x, y = self.sampler.batch(first + j * mb, mb)
            batches.append((x.to(d.device), y.to(d.device)))
        return self.probe.measure(self.module.model, batches)

    def state_dict(self) -> dict:
        return self.probe.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.probe.load_state_dict(state)


class GradNoiseProbe:
    def __init__(self, ema_decay: float = 0.95):
        if not 0.0 <= ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1), got {ema_decay}")
        self.ema_decay = ema_decay
        self.n = 0  # measurements so far (for the EMA bias correction)
        self.ema_g2 = 0.0
        self.ema_trace = 0.0

    # ------------------------------------------------------------------ maths
    @staticmethod
    def estimates(g2_small: float, g2_big: float, b_small: float, b_big: float) -> tuple[float, float]:
        """(|G|^2, tr(Sigma)) from squared norms at two batch sizes (McCandlish App. A.1)."""
        if not b_big > b_small > 0:
            raise ValueError(f"need B_big > B_small > 0, got {b_big}, {b_small}")
        g2 = (b_big * g2_big - b_small * g2_small) / (b_big - b_small)
        trace = (g2_small - g2_big) / (1.0 / b_small - 1.0 / b_big)
        return g2, trace

    def update(self, g2: float, trace: float) -> None:
        d = self.ema_decay
        self.ema_g2 = d * self.ema_g2 + (1 - d) * g2
        self.ema_trace = d * self.ema_trace + (1 - d) * trace
        self.n += 1

    @property
    def b_simple(self) -> float | None:
        if self.n == 0:
            return None
        corr = 1 - self.ema_decay**self.n  # same correction for both: cancels in the ratio
        g2, tr = self.ema_g2 / corr, self.ema_trace / corr
        if not (g2 > 0 and math.isfinite(g2) and math.isfinite(tr)):
            return None
        return tr / g2

    # -------------------------------------------------------------- measuring
    def measure(self, model: torch.nn.Module, batches: list) -> dict:
        """One measurement from k >= 2 micro-batches [(x, y), ...] of equal size; returns metrics.

        `model(x, targets=y, logits=False).loss` must be the mean loss over the micro-batch's
        y.numel() tokens (models.gpt.GPT's contract)."""
        if len(batches) < 2:
            raise ValueError("the gradient noise scale needs at least 2 micro-batches")
        params = [p for p in model.parameters() if p.requires_grad]
        total = None
        sq_norms = []
        tokens = []
        was_training = model.training
        saved = [(b, b.detach().clone()) for b in model.buffers()]  # router state: bias, load since the update
        model.train()
        try:
            with torch.enable_grad(), torch.random.fork_rng(devices=_rng_devices(params)):
                for x, y in batches:
                    out = model(x, targets=y, logits=False)
                    grads = torch.autograd.grad(out.loss, params, allow_unused=True)
                    grads = [torch.zeros_like(p) if g is None else g.detach().float() for g, p in zip(grads, params)]
                    sq_norms.append(float(sum((g * g).sum() for g in grads)))
                    tokens.append(y.numel())
                    if total is None:
                        total = grads
                    else:
                        for t, g in zip(total, grads):
                            t.add_(g)
        finally:
            model.train(was_training)
            with torch.no_grad():
                for b, v in saved:
                    b.copy_(v)
        k = len(batches)
        b_small = sum(tokens) / k
        b_big = b_small * k
        g2_small = sum(sq_norms) / k
        g2_big = float(sum(((t / k) ** 2).sum() for t in total))
        g2, trace = self.estimates(g2_small, g2_big, b_small, b_big)
        self.update(g2, trace)
        raw = trace / g2 if g2 > 0 else None
        return {
            "grad_noise_scale": self.b_simple,
            "grad_noise_scale_raw": raw,
            "grad_noise_scale_g2": g2,
            "grad_noise_scale_trace": trace,
            "grad_noise_scale_b_small": b_small,
            "grad_noise_scale_b_big": b_big,
        }

    # ----------------------------------------------------------------- resume
    def state_dict(self) -> dict:
        return {"ema_decay": self.ema_decay, "n": self.n, "ema_g2": self.ema_g2, "ema_trace": self.ema_trace}

    def load_state_dict(self, state: dict) -> None:
        self.ema_decay = float(state["ema_decay"])
        self.n = int(state["n"])
        self.ema_g2 = float(state["ema_g2"])
        self.ema_trace = float(state["ema_trace"])


def _rng_devices(params: list) -> list:
    return sorted({p.device.index or 0 for p in params if p.device.type == "cuda"})
