"""The gradient noise scale probe (pretrain/engine/noise_scale.py) every `train.noise_scale_every_steps`,
on the step's own first micro-batches; its EMAs are checkpointed (`state_dict`) and its time counts
as evaluation. The values appear in the first metrics record after a measurement."""

from __future__ import annotations

from pretrain.callbacks.base import Callback
from pretrain.data.sampler import micro_batch_start
from pretrain.engine.noise_scale import GradNoiseProbe

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
