"""Held-out loss and bits per byte (pretrain/evaluation.py) at every `train.eval_every_steps` and
at the last step, in that step's metrics record; its time counts as evaluation, not training."""

from __future__ import annotations

import torch

from pretrain.callbacks.base import Callback
from pretrain.evaluation import HeldOutEval


class HeldOutEvaluation(Callback):
    priority = 60

    def __init__(self, module, val_parts):
        cfg = module.cfg
        self.module = module
        # built with the trainer: a validation split too small for one window fails before training
        self.heldout = HeldOutEval(
            val_parts, cfg.model.seq_len, cfg.train.eval_tokens, None, cfg.train.micro_batch_size
        )
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.precision)
        self.autocast = torch.autocast(module.dist.device.type, dtype=dtype) if dtype else None

    def post_train_batch(self, out) -> None:
        if not self.info.eval_step:
            return
        d = self.module.dist
        with self.trainer.paused("eval"):
            res = self.heldout.run(self.module.model, d.device, d.rank, d.world_size, self.autocast)
        for k, v in res.items():  # already reduced over the ranks
            self.trainer.record_metric(k, v, reduce="none")
