"""One callback per concern of a training run (base.py documents the hooks and their order); config.py
decides which a run has and builds them."""

from __future__ import annotations

from pretrain.callbacks.base import Callback, StepInfo
from pretrain.callbacks.config import CallbacksConfig, RunParts

__all__ = ["Callback", "CallbacksConfig", "RunParts", "StepInfo"]
