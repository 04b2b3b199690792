"""Held-out evaluation over ranks whose every forward holds collectives: the window count does not
divide by the world size, yet every rank runs the same number of forwards (padding masked out),
so nothing deadlocks and the loss equals the one-rank value. Two gloo ranks with expert
parallelism here; ZeRO-3 through the launcher in test_moe_training.py."""

from __future__ import annotations

import numpy as np

from pretrain.evaluation import HeldOutEval

SEQ = 16


TOKENS = np.random.default_rng(0).integers(0, 64, size=SEQ * 40 + 1).astype(np.uint16)


def heldout() -> HeldOutEval:
    # 5 windows in batches of 2 over 2 ranks: rank 0 gets 3 windows (2 forwards), rank 1 gets 2 (1 forward).
    return HeldOutEval(TOKENS, SEQ, 5 * SEQ, bytes_per_token=2.0, batch_size=2)


def test_uneven_windows_give_every_rank_the_same_number_of_forwards():
    ev = heldout()
    assert [len(ev.batches(r, 2)) for r in (0, 1)] == [2, 1]
    assert ev.forwards(2) == 2 and ev.forwards(1) == 3
    assert ev.forwards(8) == 1  # ranks 5-7 hold no window and still run one (masked) forward
