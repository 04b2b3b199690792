"""LR schedules and the step-indexed sampler that makes resume exact."""
from __future__ import annotations

import numpy as np
import pytest

from pretrain.config.schema import ScheduleConfig
from pretrain.sampler import WindowSampler, micro_batch_start
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
