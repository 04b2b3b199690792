"""LR schedules and the step-indexed sampler that makes resume exact."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pretrain.config.schema import ScheduleConfig
from pretrain.feed.sampler import WindowSampler, micro_batch_start
from rundir.schedules import lr_at


def test_warmup_then_cosine():
    cfg = ScheduleConfig(name="cosine", warmup_steps=10, min_lr_ratio=0.1)
    assert lr_at(0, 110, 1.0, cfg) == pytest.approx(0.1)
    assert lr_at(9, 110, 1.0, cfg) == pytest.approx(1.0)
    assert lr_at(10, 110, 1.0, cfg) == pytest.approx(1.0)
    assert lr_at(60, 110, 1.0, cfg) == pytest.approx(0.55)  # halfway: floor + half the range
    assert lr_at(110, 110, 1.0, cfg) == pytest.approx(0.1)


def test_linear_and_constant():
    assert lr_at(50, 100, 2.0, ScheduleConfig(name="linear", warmup_steps=0, min_lr_ratio=0.0)) == pytest.approx(1.0)
    assert lr_at(77, 100, 2.0, ScheduleConfig(name="constant", warmup_steps=5)) == 2.0


@pytest.mark.parametrize("shape, mid", [("linear", 0.55), ("cosine", 0.55), ("sqrt", 1 - 0.9 * np.sqrt(0.5))])
def test_wsd(shape, mid):
    cfg = ScheduleConfig(name="wsd", warmup_steps=0, decay_fraction=0.2, decay_shape=shape, min_lr_ratio=0.1)
    assert lr_at(0, 100, 1.0, cfg) == 1.0 and lr_at(79, 100, 1.0, cfg) == 1.0  # stable phase
    assert lr_at(99, 100, 1.0, cfg) == pytest.approx(0.1)  # fully decayed at the last step
    assert lr_at(89, 100, 1.0, cfg) == pytest.approx(mid)  # halfway through the decay


def test_sampler_is_a_function_of_position():
    tokens = np.arange(10_000, dtype=np.uint16)
    a, b = WindowSampler(tokens, 32, seed=1), WindowSampler(tokens, 32, seed=1)
    x1, y1 = a.batch(500, 4)
    b.batch(0, 100)  # another history does not matter
    x2, _ = b.batch(500, 4)
    assert (x1 == x2).all() and (y1[:, :-1] == x1[:, 1:]).all()
    # every window is used exactly once per epoch
    n = a.n_windows
    starts = {int(a.batch(i, 1)[0][0, 0]) for i in range(n)}
    assert len(starts) == n


def test_global_batch_independent_of_world_size():
    """1 rank x 2 micro-steps and 2 ranks x 1 micro-step read the same samples per step."""
    one = sorted(micro_batch_start(3, m, 0, 16, 8, 1) for m in range(2))
    two = sorted(micro_batch_start(3, 0, r, 16, 8, 2) for r in range(2))
    assert one == two == [48, 56]


def _rows_one_by_one(sampler, first, size):
    """The sampler's definition, sample by sample: window perm_epoch[i mod n] of epoch i // n."""
    rows = []
    for i in range(first, first + size):
        epoch, idx = divmod(i, sampler.n_windows)
        w = int(np.random.default_rng([sampler.seed, epoch]).permutation(sampler.n_windows)[idx])
        rows.append(np.asarray(sampler.tokens[w * sampler.seq_len : (w + 1) * sampler.seq_len + 1], dtype=np.int64))
    return np.stack(rows)


def test_vectorised_batch_reads_the_same_windows_from_a_memmap_and_from_shards():
    from pretrain.data.tokens import TokenStream

    full = np.random.default_rng(0).integers(0, 60_000, size=20_011).astype(np.uint16)
    cuts = [0, 3000, 3001, 9000, 20_011]  # a one-token shard; windows straddle shard boundaries
    sharded = TokenStream([full[a:b] for a, b in zip(cuts, cuts[1:])])
    for tokens in (full, sharded):
        s = WindowSampler(tokens, 64, seed=3)
        for first, size in [(0, 8), (300, 40), (1000, 3)]:  # (300, 40) crosses the end of epoch 0 (312 windows)
            x, y = s.batch(first, size)
            rows = _rows_one_by_one(s, first, size)
            assert x.dtype == torch.int64 and x.shape == (size, 64)
            assert np.array_equal(x.numpy(), rows[:, :-1]) and np.array_equal(y.numpy(), rows[:, 1:])
