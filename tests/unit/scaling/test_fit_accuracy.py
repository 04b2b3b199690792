"""`scalelab fit accuracy TABLE`: the sigmoid Acc(L) = a / (1 + exp(-k (L - L0))) + b recovers known
parameters, per task, with bootstrap intervals and warnings for no signal and flat fits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scaling.fits.accuracy import SigmoidAccuracy, fit_accuracy

TRUTH = {"a": 0.6, "b": 0.25, "k": -5.0, "L0": 3.0}


def table(truth=TRUTH, noise=0.0, n=30, lo=2.0, hi=4.0, seed=0):
    L = np.linspace(lo, hi, n)
    acc = SigmoidAccuracy(**truth).predict(L) + np.random.default_rng(seed).normal(0, noise, n)
    return pd.DataFrame({"loss": L, "acc": acc})


def test_noiseless_sigmoid_is_recovered():
    rec = fit_accuracy(table())
    for k, v in TRUTH.items():
        assert rec.params[k] == pytest.approx(v, rel=1e-4)
    assert rec["law"] == "accuracy" and not rec.warnings


def test_accuracies_at_chance_and_flat_fits_are_warned():
    at_chance = pd.DataFrame(
        {"loss": np.linspace(3.5, 4.5, 12), "acc": 0.25 + np.random.default_rng(0).normal(0, 0.005, 12)}
    )
    rec = fit_accuracy(at_chance, chance=0.25)
    assert any("within 0.02 of chance" in w for w in rec.warnings)
    assert any("the fit is flat" in w for w in rec.warnings)
    # only the low-loss tail of the curve: the mid-point lies beyond the data
    rec = fit_accuracy(table(noise=0.0, lo=2.0, hi=2.7))
    assert any("only one tail" in w for w in rec.warnings)


def test_predicted_accuracy_has_a_bootstrap_interval_around_the_truth():
    from scaling.fits.accuracy import predict_accuracy

    rec = fit_accuracy(table(noise=0.01, seed=3).assign(task="piqa"), bootstrap=40)
    p = predict_accuracy(rec, 3.0, task="piqa")
    truth = float(SigmoidAccuracy(**TRUTH).predict(3.0))  # 0.55 at the mid-point
    assert p["interval"][0] < p["accuracy"] < p["interval"][1]
    assert abs(p["accuracy"] - truth) < 0.02
    with pytest.raises(Exception, match="not in this accuracy fit"):
        predict_accuracy(rec, 3.0, task="arc")


def test_the_ceiling_never_exceeds_one():
    # accuracies that saturate at 1 with noise: an unconstrained a + b would overshoot
    truth = {"a": 0.5, "b": 0.5, "k": -8.0, "L0": 3.0}
    df = table(truth, noise=0.02, lo=2.0, hi=3.5, seed=4).assign(acc=lambda d: d.acc.clip(0, 1))
    rec = fit_accuracy(df, bootstrap=30)
    assert rec.params["a"] + rec.params["b"] <= 1 + 1e-9
    s = rec["bootstrap"]["samples"]
    assert max(a + b for a, b in zip(s["a"], s["b"])) <= 1 + 1e-9
