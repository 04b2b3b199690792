"""Activation checkpointing of transformer blocks (torch.utils.checkpoint, non-reentrant).

A checkpointed block keeps only its inputs in the forward pass and runs again during backward,
trading about one more forward of compute for the activations of every block it covers. The
trainer chooses which blocks (`GPT.set_activation_checkpointing`); models stay framework-free.

A block runs twice per backward when checkpointed, so state a forward changes on purpose (the
aux-free router's per-step load count) must not change again in the recomputation: such code
asks `recomputing()`.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

from torch.utils.checkpoint import checkpoint

_depth = 0  # recomputations in progress, any thread


def recomputing() -> bool:
    """True while a checkpointed block is being recomputed for backward (not a real forward)."""
    return _depth > 0


@contextmanager
def _recompute():
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1


def _contexts():
    return nullcontext(), _recompute()


def checkpointed(fn, *args):
    """`fn(*args)` with its activations recomputed in backward (RNG state restored for the rerun)."""
    return checkpoint(fn, *args, use_reentrant=False, context_fn=_contexts)


def blocks_to_checkpoint(n_layers: int, every: int) -> frozenset[int]:
    """Layer indices checkpointed when every `every`-th block is (0: none; 1: all): 0, every, 2 every, ..."""
    if every < 0:
        raise ValueError(f"every must be >= 0 (got {every})")
    return frozenset(range(0, n_layers, every)) if every else frozenset()
