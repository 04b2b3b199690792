"""`scaling.core.bootstrap.interval` is the one percentile interval: the forms its callers need give
the numbers np.percentile gives at the same levels."""

import numpy as np

from dashboard.views.plotting import percentile_band
from scaling.core.bootstrap import interval
from scaling.laws.multiplier import draw_interval


def test_interval_is_numpys_percentiles_of_the_finite_draws():
    draws = np.random.default_rng(0).lognormal(size=400)
    expected = [float(np.percentile(draws, 5.0)), float(np.percentile(draws, 95.0))]
    assert interval(np.append(draws, [np.nan, np.inf]), 0.9) == expected
    assert interval([1.0, np.nan], 0.9) is None  # fewer than 2 finite draws


def test_spread_only_leaves_out_a_quantity_the_resamples_cannot_move():
    assert interval([3.0] * 5, 0.95) == [3.0, 3.0]
    assert interval([3.0] * 5, 0.95, spread_only=True) is None
    assert interval([3.0, 4.0], 0.95, spread_only=True) == interval([3.0, 4.0], 0.95)


def test_infinite_multiplier_draws_make_an_unbounded_end():
    iv, n_inf = draw_interval([1.0, 2.0, 3.0, np.inf, np.inf, np.inf, np.inf, np.inf, np.nan], 0.5)
    assert n_inf == 5 and iv[0] == 2.75 and iv[1] is None  # 8 draws: the 25th percentile between 2 and 3
    assert draw_interval([1.0, 2.0, 3.0], 0.5) == ([1.5, 2.5], 0)


def test_dashboard_band_uses_the_finite_rows():
    d = np.random.default_rng(1).normal(size=(50, 7))
    d[3, 2] = np.nan  # that whole row is left out
    lo, hi = percentile_band(d, 0.8)
    kept = np.delete(d, 3, axis=0)
    assert np.array_equal(lo, np.percentile(kept, 100 * (1 - 0.8) / 2, axis=0)) and np.array_equal(
        hi, np.percentile(kept, 100 * (1 + 0.8) / 2, axis=0)
    )
    assert percentile_band(d[:4], 0.8) is None  # fewer than 5 finite rows
