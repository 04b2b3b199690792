"""Fault injection for tests and benchmarks/faults.py, through environment variables (never set
in real runs; the callback is only added when one of them is):

  SCALELAB_FAULT_NAN_STEP=k        the loss of step k+1 (0-based k) becomes NaN: the run stops
                                   (exit 1) with the last good checkpoint kept
  SCALELAB_FAULT_NAN_MICRO=i       with the above: only micro-batch i of that step (default: all)
  SCALELAB_FAULT_INF_GRAD_STEP=k   the gradients of step k+1 become infinite while its loss stays
                                   finite: the update is skipped (train.nonfinite_grad)

(SCALELAB_FAULT_CHECKPOINT_DELAY_S, which holds a checkpoint write open, acts inside
pretrain/checkpoint/store.py's save.) The faults act on each micro-batch's loss through the train
module's loss hook, so the training loop itself has no test branches.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pretrain.callbacks.base import Callback

NAN_STEP, NAN_MICRO, INF_GRAD_STEP = (
    "SCALELAB_FAULT_NAN_STEP",
    "SCALELAB_FAULT_NAN_MICRO",
    "SCALELAB_FAULT_INF_GRAD_STEP",
)


def _int(env, key: str) -> int | None:
    raw = env.get(key)
    return int(raw) if raw not in (None, "") else None


def faults_from_env(env: Mapping[str, str] = os.environ) -> dict[str, int | None] | None:
    """FaultInjection's settings from the environment, or None when no fault is asked for."""
    faults = {
        "nan_step": _int(env, NAN_STEP),
        "nan_micro": _int(env, NAN_MICRO),
        "inf_grad_step": _int(env, INF_GRAD_STEP),
    }
    return faults if faults["nan_step"] is not None or faults["inf_grad_step"] is not None else None


class FaultInjection(Callback):
    priority = 95

    def __init__(
        self, module, nan_step: int | None = None, nan_micro: int | None = None, inf_grad_step: int | None = None
    ):
        self.module = module
        self.nan_step, self.nan_micro, self.inf_grad_step = nan_step, nan_micro, inf_grad_step

    def pre_train(self) -> None:
        self.module.add_loss_hook(self._hook)

    def _hook(self, step: int, micro: int, loss):
        if step == self.nan_step and self.nan_micro in (None, micro):
            loss = loss * float("nan")
        if step == self.inf_grad_step and micro == 0:
            loss.register_hook(lambda g: g * float("inf"))  # the loss stays finite, its gradients do not
        return loss
