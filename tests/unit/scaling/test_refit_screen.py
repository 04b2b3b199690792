"""`study next --screen refit` (scaling.planning.screen) on a case whose answer is known: two groups of
runs, each measuring its own mean (y = θ_g + noise), and a target that is one group's mean. A batch in
the other group cannot inform the target at all; the screen must pick the batch that can, and its
forecast must say so (no narrowing for the uninformative batch, about sqrt(5/15) for the other)."""

from __future__ import annotations

import numpy as np

from scaling.planning.forecast import Model
from scaling.planning.screen import criterion_of, isoflop_batch, screen


def _means(X, y):
    g = X[:, 0].astype(int)
    if not (np.any(g == 0) and np.any(g == 1)):
        raise ValueError("a resample without one of the groups")
    return np.array([y[g == 0].mean(), y[g == 1].mean()])


def _refit(X, y, starts):
    return _means(X, y), lambda idx: _means(X[idx], y[idx])


def _case(target: int):
    rng = np.random.default_rng(0)
    X_old = np.repeat([0.0, 1.0], 5)[:, None]
    noise = np.tile([-1.2, -0.6, 0.0, 0.6, 1.2], 2)  # the same scatter in both groups as in the pooled residuals
    y_old = np.array([1.0, 2.0])[X_old[:, 0].astype(int)] + noise
    point = _means(X_old, y_old)
    draws = []
    while len(draws) < 200:
        idx = rng.integers(0, 10, 10)
        try:
            draws.append(_means(X_old[idx], y_old[idx]))
        except ValueError:
            continue
    draws = np.array(draws)
    resid = y_old - point[X_old[:, 0].astype(int)]
    model = Model(
        predict=lambda th, X: th[X[:, 0].astype(int)],
        refit=_refit,
        targets=lambda th: th[:, [target]],
    )
    X_cand = np.repeat([0.0, 1.0], 10)[:, None]  # candidates 0-9 in group 0, 10-19 in group 1
    batches = {"group 0": (list(range(10)), 10.0), "group 1": (list(range(10, 20)), 10.0)}
    return model, X_old, y_old, X_cand, batches, draws, point, resid


def test_the_refit_screen_picks_the_batch_that_can_inform_the_target():
    for target, informative, idle in ((1, "group 1", "group 0"), (0, "group 0", "group 1")):
        model, X_old, y_old, X_cand, batches, draws, point, resid = _case(target)
        out = screen(model, X_old, y_old, X_cand, batches, draws, point, resid, weights=[1.0], futures=8, resamples=60)
        assert [s.label for s in out] == [informative, idle]
        by = {s.label: s for s in out}
        assert 0.4 < np.sqrt(by[informative].criterion) < 0.8  # sqrt(5/15) = 0.58 in theory
        assert 0.75 < np.sqrt(by[idle].criterion) < 1.3  # no narrowing, up to the forecast's noise
        assert by[informative].score > 0 > by[idle].score or by[idle].score < by[informative].score / 3


def test_the_screen_forecasts_a_batch_once_and_scores_per_flop():
    model, X_old, y_old, X_cand, batches, draws, point, resid = _case(1)
    batches = {"a": (list(range(10, 20)), 10.0), "again": (list(range(19, 9, -1)), 10.0), "dear": ([10, 11], 1e6)}
    out = screen(model, X_old, y_old, X_cand, batches, draws, point, resid, weights=[1.0], futures=4, resamples=40)
    assert sorted(s.label for s in out) == ["a", "dear"]  # "again" is the same runs as "a"
    assert out[0].label == "a"  # two runs for 1e6 FLOPs narrow less per FLOP than ten for 10


def test_the_criterion_weighs_the_targets_and_refuses_a_missing_forecast():
    assert criterion_of([0.5, 1.0], [1.0, 0.0]) == 0.25
    assert criterion_of([0.5, 1.0], [1.0, 1.0]) == 0.625
    assert criterion_of([np.nan, 0.5], [0.0, 1.0]) == 0.25
    assert criterion_of([np.nan, 0.5], [1.0, 1.0]) == float("inf")


def test_the_isoflop_batch_spreads_one_compute_over_model_sizes():
    N = np.geomspace(1e6, 1e9, 30)
    flops = np.concatenate([np.full(20, 1e17), np.full(10, 1e19)])
    chosen, spent = isoflop_batch(N, flops, 9e17, 9)
    assert len(chosen) == 9 and spent == 9e17 and all(i < 20 for i in chosen)
    assert chosen[0] == 0 and chosen[-1] == 19  # from the smallest to the largest model at that compute
