"""Evaluation of checkpoints as they are saved (the `eval:` section), through the evaluator that
another package registered (pretrain/checkpoint/evaluators.py; scalelab's is lm-eval in evals/inloop.py).

The cadence is the trainer's: the first checkpoint at or after every `eval.every_tokens` training
tokens, and the final one when `eval.at_end`. The main rank evaluates while the others wait at
their next collective; the time counts as evaluation (summary.json `eval_s`), never as training,
and nothing the evaluator raises stops training.
"""

from __future__ import annotations

from pathlib import Path

from pretrain.callbacks.base import Callback
from pretrain.checkpoint.evaluators import EvalJob


class CheckpointEvaluation(Callback):
    priority = 0

    def __init__(self, evaluator, section):
        self.evaluator, self.section = evaluator, section
        self._prev_tokens: int | None = None

    def post_checkpoint_saved(self, path: Path) -> None:
        info = self.info
        if not info.is_main:
            return
        cfg, step = info.config, info.step
        tps = cfg.tokens_per_step()
        tokens = step * tps
        if self._prev_tokens is None:  # first checkpoint of this attempt (also after a resume)
            every_steps = cfg.train.checkpoint_every_steps or step
            self._prev_tokens = max(0, step - every_steps) * tps
        every = self.section.every_tokens
        due = bool(every) and tokens // every > self._prev_tokens // every
        final = step >= info.total_steps and self.section.at_end
        self._prev_tokens = tokens
        if not (due or final) or self.evaluator.done(self.section, info.run_dir.path, step):
            return
        job = EvalJob(Path(path), info.run_dir.path, step, tokens, cfg.wandb.mode != "disabled", info.log)
        with self.trainer.paused("eval"):
            try:
                self.evaluator.evaluate(self.section, job)
            except Exception as exc:  # the evaluator records its own failures; this is the last guard
                info.log(f"eval at step {step} FAILED ({type(exc).__name__}: {exc}); training continues")
