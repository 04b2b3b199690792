"""The design criterion (scaling.planning.information) on cases whose optimal design is known in closed form."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.planning.information import greedy


def test_one_parameter_power_law_picks_x_equal_e_squared_per_flop():
    """y = log A - theta log x, theta unknown, a run at x costs x: the information one run adds is
    (log x)^2 / sigma^2, so per unit cost (log x)^2 / x, largest at log x = 2 (x = e^2)."""
    x = np.geomspace(1.5, 100.0, 801)
    F = -np.log(x)[None, :, None]  # d y / d theta
    G = np.ones((1, 1, 1))  # the target is theta itself
    # FLOPs bind (a budget of a few runs, no cap on their number): the first pick is the best per FLOP
    d = greedy(np.array([[1e-4]]), F, G, x, sigma=1.0, budget=30.0, max_runs=10**6)
    assert x[d.chosen[0]] == pytest.approx(np.e**2, rel=0.01) and d.spent <= 30.0
    # the run count binds (one run, FLOPs to spare): the most informative run, the one farthest out
    d = greedy(np.array([[1e-4]]), F, G, x, sigma=1.0, budget=1e6, max_runs=1)
    assert d.chosen == [len(x) - 1]


def test_extrapolating_a_line_splits_runs_as_elfving_says():
    """y = t0 + t1 t on [-1, 1], predicting at t* = 3 (outside the range): the c-optimal design puts
    (t* + 1) / (2 t*) = 2/3 of the runs at t = 1, the rest at t = -1, none in the middle."""
    t_star, reps = 3.0, 300
    t = np.repeat([-1.0, 0.0, 1.0], reps)
    F = np.stack([np.ones_like(t), t], axis=-1)[None]
    G = np.array([[[1.0, t_star]]])
    d = greedy(np.eye(2) * 100.0, F, G, np.ones_like(t), sigma=1.0, max_runs=240, min_gain=0.0)
    picked = t[d.chosen]
    assert len(picked) == 240
    assert np.mean(picked == 1.0) == pytest.approx((t_star + 1) / (2 * t_star), abs=0.02)
    assert np.mean(picked == 0.0) == 0.0
    # the criterion only falls, and the variance ratio matches the closed form of the design
    assert all(b <= a + 1e-12 for a, b in zip(d.steps, d.steps[1:]))
    n1, n0 = np.sum(picked == 1.0), np.sum(picked == -1.0)
    M = np.array([[len(picked), n1 - n0], [n1 - n0, len(picked)]]) + np.eye(2) / 100.0
    c = np.array([1.0, t_star])
    assert d.after[0, 0] == pytest.approx(c @ np.linalg.solve(M, c), rel=1e-6)


def test_budget_and_run_count_bound_the_design():
    x = np.geomspace(1.0, 1e3, 50)
    F = np.stack([np.ones_like(x), -np.log(x)], axis=-1)[None]
    G = np.array([[[1.0, -np.log(1e5)]]])
    d = greedy(np.eye(2), F, G, x, sigma=0.1, budget=500.0, max_runs=5)
    assert 1 <= len(d.chosen) <= 5 and d.spent <= 500.0 and len(set(d.chosen)) == len(d.chosen)
    assert d.width_ratio()[0] < 1.0


def test_conflicting_candidates_are_not_both_chosen():
    """Extrapolating a line from t in {-1, -0.99, 1}: the design wants both ends; with -1 and -0.99
    in conflict (one group twice) it takes one of them and the far end, never both near copies."""
    t = np.array([-1.0, -0.99, 1.0])
    F = np.stack([np.ones_like(t), t], axis=-1)[None]
    G = np.array([[[1.0, 3.0]]])
    free = greedy(np.eye(2) * 100.0, F, G, np.ones_like(t), sigma=1.0, max_runs=3, min_gain=0.0)
    assert sorted(free.chosen) == [0, 1, 2]
    close = np.abs(t[:, None] - t[None, :]) < 0.1
    d = greedy(np.eye(2) * 100.0, F, G, np.ones_like(t), sigma=1.0, max_runs=3, min_gain=0.0, conflicts=close)
    assert 2 in d.chosen and len(d.chosen) == 2 and not {0, 1} <= set(d.chosen)


def test_target_weights_design_for_the_weighted_targets_alone():
    """Two targets on the line y = t0 + t1 t, t in {-1, 1}: the prediction at t* = 3 and at t* = -3.
    Weight on the first alone: Elfving's 2/3 of the runs at +1; on the second alone: 2/3 at -1; equal
    weights: by symmetry, half at each end."""
    reps = 300
    t = np.repeat([-1.0, 1.0], reps)
    F = np.stack([np.ones_like(t), t], axis=-1)[None]
    G = np.array([[[1.0, 3.0], [1.0, -3.0]]])

    def share_at_plus_one(weights):
        d = greedy(np.eye(2) * 100.0, F, G, np.ones_like(t), sigma=1.0, max_runs=240, min_gain=0.0, weights=weights)
        return np.mean(t[d.chosen] == 1.0)

    assert share_at_plus_one([1.0, 0.0]) == pytest.approx(2 / 3, abs=0.02)
    assert share_at_plus_one([0.0, 1.0]) == pytest.approx(1 / 3, abs=0.02)
    assert share_at_plus_one(None) == pytest.approx(0.5, abs=0.02)
    with pytest.raises(ValueError, match="one non-negative weight per target"):
        greedy(np.eye(2), F, G, np.ones_like(t), sigma=1.0, weights=[0.0, 0.0])
