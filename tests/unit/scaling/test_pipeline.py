"""The fit pipeline's shared steps: one interval helper, one bootstrap section, one holdout report."""

from __future__ import annotations

import numpy as np
import pytest

from scaling import InputError, fit_kaplan
from scaling.core.bootstrap import interval
from scaling.fits import pipeline
from scaling.synthetic.runs import chinchilla_table


def test_interval_is_the_percentile_interval_of_the_finite_draws():
    draws = np.r_[np.arange(101.0), np.nan, np.inf]
    assert interval(draws, 0.9) == [pytest.approx(5.0), pytest.approx(95.0)]
    assert interval([1.0, np.nan], 0.95) is None  # fewer than 2 finite draws: no interval
    lo, hi = interval(np.array([[0.0, 10.0], [100.0, np.nan], [50.0, 20.0]]), 0.5, axis=0)  # a band, per column
    assert lo == pytest.approx([25.0, 12.5]) and hi == pytest.approx([75.0, 17.5])


def test_bootstrap_section_counts_and_explains_failures():
    def one(idx):
        if idx[0] == 0:
            return None
        return {"m": float(np.mean(idx))}

    b = pipeline.bootstrap(one, [np.array([0, 1]), np.array([1, 2]), np.array([2, 3])], seed=7, ci=0.95)
    assert (b.n, b.failed, b.reasons) == (3, 1, {"no fit": 1})
    assert b.intervals() == {"m": [pytest.approx(1.525), pytest.approx(2.475)]}
    rec = b.record(method="m")
    assert list(rec) == [
        "n",
        "failed",
        "failure_reasons",
        "seed",
        "ci",
        "method",
        "seconds",
        "standard_errors",
        "samples",
    ]
    assert rec["samples"] == {"m": [1.5, 2.5]} and b.failure_text() == "1x no fit"


def test_holdout_report_has_one_shape():
    r = pipeline.holdout_report(
        2, "the largest", "loss", pipeline.rel_errors([1.1, 0.8], [1.0, 1.0]), signed=True, C_min=1e20
    )
    assert r == {
        "n_points": 2,
        "rule": "the largest",
        "quantity": "loss",
        "mean_abs_rel_error": pytest.approx(0.15),
        "max_abs_rel_error": pytest.approx(0.2),
        "mean_rel_error": pytest.approx(-0.05),
        "C_min": 1e20,
    }
    none = pipeline.holdout_report(3, "r", "N_opt", note="no minimum")
    assert none["mean_abs_rel_error"] is None and none["note"] == "no minimum"


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"bootstrap": -1}, "--bootstrap must be >= 0"),
        ({"holdout": "smallest"}, "--holdout must be 'largest'"),
        ({"ci": 1.5}, "--ci must be between 0 and 1"),
    ],
)
def test_every_fit_refuses_bad_shared_options(kw, msg):
    with pytest.raises(InputError, match=msg):
        fit_kaplan(chinchilla_table(noise=0.0, n_per_budget=3), **kw)
