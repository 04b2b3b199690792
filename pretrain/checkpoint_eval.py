"""Kept for one release: evaluator plugins (the `scalelab.checkpoint_evaluators` entry point) written against
`pretrain.checkpoint_eval`; the interface lives in `pretrain.checkpoint.evaluators`."""

from pretrain.checkpoint.evaluators import *  # noqa: F403
