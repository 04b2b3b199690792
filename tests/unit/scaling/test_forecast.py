"""The refit forecast (scaling.planning.forecast.preposterior) on a case with a closed-form answer:
a straight line fitted by least squares, whose bootstrap interval of a prediction has width
2 z s sqrt(c' (X'X)^-1 c) before and after the extra runs (s: the residuals' scatter)."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.planning.forecast import Model, percentile_width, preposterior


def _ols(X, y, starts):
    A = np.column_stack([np.ones(len(X)), X[:, 0]])
    return np.linalg.lstsq(A, y, rcond=None)[0]


def _refit(X, y, starts):
    return _ols(X, y, starts), lambda idx: _ols(X[idx], y[idx], None)


def test_the_forecast_width_of_a_line_matches_least_squares_theory():
    """y = t0 + t1 x + N(0, 1) at 20 runs on [-1, 1], predicting at x* = 3: adding 20 runs at x = 1
    narrows the prediction's interval by sqrt(c'M1^-1 c / c'M0^-1 c) (= 0.62 here)."""
    rng = np.random.default_rng(0)
    sigma, x_star = 1.0, 3.0
    x_old = np.linspace(-1.0, 1.0, 20)[:, None]
    x_new = np.ones((20, 1))
    truth = np.array([1.0, 2.0])
    y_old = truth[0] + truth[1] * x_old[:, 0] + sigma * rng.standard_normal(20)
    point = _ols(x_old, y_old, None)
    # today's bootstrap laws, as the fit would keep them
    draws = np.array([_ols(x_old[i], y_old[i], None) for i in (rng.integers(0, 20, 20) for _ in range(400))])
    resid = y_old - (point[0] + point[1] * x_old[:, 0])
    model = Model(
        predict=lambda th, X: th[0] + th[1] * X[:, 0],
        refit=_refit,
        targets=lambda th: (th[:, 0] + th[:, 1] * x_star)[:, None],
    )
    f = preposterior(model, x_old, y_old, x_new, draws, point, resid, futures=40, resamples=100, seed=1)

    def theory(x):
        A = np.column_stack([np.ones(len(x)), x])
        c = np.array([1.0, x_star])
        return 2 * 1.96 * s_hat * np.sqrt(c @ np.linalg.solve(A.T @ A, c))

    s_hat = np.sqrt(np.mean(resid**2))  # the bootstrap, like the simulated noise, sees the residuals' scatter
    before, after = theory(x_old[:, 0]), theory(np.concatenate([x_old[:, 0], x_new[:, 0]]))
    # a pairs bootstrap of 20 runs is within ~10% of the least-squares width on most data sets
    assert f.today[0] == pytest.approx(before, rel=0.15)
    assert np.nanmean(f.after[:, 0]) == pytest.approx(after, rel=0.15)
    assert f.width_ratio()[0] == pytest.approx(after / before, rel=0.15)
    assert f.failed == 0 and f.after.shape == (40, 1)


def test_runs_that_carry_no_information_leave_the_width_as_it_is():
    """Runs at x = 0 (the old runs' mean) double the intercept's information and add none to the
    slope's (sum of (x - mean)^2 is unchanged): the intercept's width x1/sqrt(2), the slope's x1."""
    rng = np.random.default_rng(3)
    x_old = np.linspace(-1.0, 1.0, 30)[:, None]
    y_old = 0.5 * x_old[:, 0] + rng.standard_normal(30)
    point = _ols(x_old, y_old, None)
    draws = np.array([_ols(x_old[i], y_old[i], None) for i in (rng.integers(0, 30, 30) for _ in range(300))])
    model = Model(lambda th, X: th[0] + th[1] * X[:, 0], _refit, lambda th: th)
    f = preposterior(
        model,
        x_old,
        y_old,
        np.zeros((30, 1)),
        draws,
        point,
        y_old - point[0] - point[1] * x_old[:, 0],
        futures=30,
        resamples=100,
        seed=2,
    )
    r = f.width_ratio()
    assert r[0] == pytest.approx(np.sqrt(0.5), rel=0.1)  # intercept: twice the runs at its x
    assert r[1] == pytest.approx(1.0, rel=0.1)


def test_percentile_width_ignores_failed_fits():
    s = np.array([[0.0], [1.0], [np.nan], [np.inf], [2.0]])
    assert percentile_width(s, 0.5)[0] == pytest.approx(1.0)


def test_the_forecast_counts_the_laws_whose_target_is_undefined():
    """A target defined only where the slope exceeds 0.5 (as N_opt exists only where the law has an
    optimum in range): the forecast reports the share of today's laws and of the refits without it,
    and its widths cover the rest."""
    rng = np.random.default_rng(5)
    x_old = np.linspace(-1.0, 1.0, 20)[:, None]
    y_old = 0.5 * x_old[:, 0] + rng.standard_normal(20)
    point = _ols(x_old, y_old, None)
    draws = np.array([_ols(x_old[i], y_old[i], None) for i in (rng.integers(0, 20, 20) for _ in range(200))])

    def targets(th):
        return np.where(th[:, 1] > 0.5, th[:, 0], np.nan)[:, None]

    model = Model(lambda th, X: th[0] + th[1] * X[:, 0], _refit, targets)
    f = preposterior(
        model,
        x_old,
        y_old,
        np.ones((10, 1)),
        draws,
        point,
        y_old - point[0] - point[1] * x_old[:, 0],
        futures=10,
        resamples=50,
        seed=4,
    )
    assert f.undefined_today[0] == pytest.approx(np.mean(draws[:, 1] <= 0.5))
    assert 0 < f.undefined_today[0] < 1 and 0 <= f.undefined_after[0] <= 1
    assert np.isfinite(f.today[0]) and np.isfinite(f.width_ratio()[0])
