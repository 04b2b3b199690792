"""Chinchilla fits: Epoch acceptance numbers, approach consistency, synthetic recovery, warnings."""

from __future__ import annotations

import numpy as np
import pytest

from scaling import FitRecord, fit_chinchilla
from scaling.fits.chinchilla.huber_fit import Objective, paper_grid
from scaling.laws.loss import ChinchillaLaw
from scaling.synthetic.runs import TRUE_CHINCHILLA, chinchilla_table
from tests.helpers import epoch_csv


@pytest.fixture(scope="module")
def epoch_fit():
    return fit_chinchilla(epoch_csv(), drop_highest_k=5)


def test_epoch_approach3_matches_published(epoch_fit):
    p = epoch_fit.params
    assert epoch_fit["n_points"] == 240
    assert epoch_fit["objective"] <= 0.0010182740 + 1e-9
    assert abs(p["alpha"] - 0.3473) <= 0.002
    assert abs(p["beta"] - 0.3672) <= 0.003
    assert abs(p["E"] - 1.817) <= 0.005
    assert 470 < p["A"] < 490 and 2100 < p["B"] < 2200
    assert p["a"] == pytest.approx(p["beta"] / (p["alpha"] + p["beta"]))
    assert epoch_fit["diagnostics"]["converged"]
    assert not [w for w in epoch_fit.warnings if "bound" in w or "converge" in w]
    for key in ("law", "approach", "params", "intervals", "objective", "n_points", "warnings", "data_sha256"):
        assert key in epoch_fit


def test_analytic_gradient_matches_finite_differences(epoch_fit):
    from scaling.data.datasets import load_epoch_chinchilla

    df = load_epoch_chinchilla(5)
    obj = Objective(df.N, df.D, df.loss)
    rng = np.random.default_rng(1)
    for th in paper_grid()[rng.choice(4500, 5, replace=False)] * 0.7 + 0.1:
        f, g = obj(th)
        num = np.array([(obj(th + h)[0] - obj(th - h)[0]) / 2e-6 for h in np.eye(5) * 1e-6])
        assert np.allclose(g, num, rtol=1e-4, atol=1e-7)
    # the vectorised grid objective agrees with the scalar one
    pts = paper_grid()[:7]
    assert np.allclose(obj.batch(pts), [obj(t)[0] for t in pts])


def test_fit_is_deterministic_and_hash_stable():
    a = fit_chinchilla(epoch_csv(), drop_highest_k=5, top_k=8)
    b = fit_chinchilla(epoch_csv(), drop_highest_k=5, top_k=8)
    assert a.params == b.params and a["data_sha256"] == b["data_sha256"]


def test_epoch_bootstrap_in_line_with_epoch():
    rec = fit_chinchilla(epoch_csv(), drop_highest_k=5, bootstrap=40, seed=3, top_k=8)
    iv = rec.intervals
    # Epoch (4000 resamples): alpha 0.317-0.373, beta 0.331-0.415, E 1.769-1.871; 40 resamples are noisier.
    assert 0.30 < iv["alpha"][0] < 0.335 and 0.36 < iv["alpha"][1] < 0.39
    assert 0.31 < iv["beta"][0] < 0.35 and 0.39 < iv["beta"][1] < 0.44
    assert 1.74 < iv["E"][0] < 1.80 and 1.84 < iv["E"][1] < 1.90
    assert iv["a"][0] < rec.params["a"] < iv["a"][1]
    assert len(rec["bootstrap"]["samples"]["alpha"]) == 40
    # same seed, same intervals
    again = fit_chinchilla(epoch_csv(), drop_highest_k=5, bootstrap=5, seed=3, top_k=8)
    first = fit_chinchilla(epoch_csv(), drop_highest_k=5, bootstrap=5, seed=3, top_k=8)
    assert again.intervals == first.intervals
    derived = rec["derived"][0]
    assert derived["N_opt_interval"][0] < derived["N_opt"] < derived["N_opt_interval"][1]


def test_approach2_consistent_with_approach3(epoch_fit):
    rec = fit_chinchilla(epoch_csv(), approach=2, drop_highest_k=5, bootstrap=30)
    a2, b2 = rec.params["a"], rec.params["b"]
    assert a2 + b2 == pytest.approx(1.0, abs=1e-9)  # D_opt = C / 6 N_opt
    assert abs(a2 - epoch_fit.params["a"]) < 0.03
    lo, hi = rec.intervals["a"]
    assert lo < epoch_fit.params["a"] + 0.02 and hi > epoch_fit.params["a"] - 0.02
    assert rec["diagnostics"]["n_budgets"] >= 5


def test_approach1_runs_and_warns():
    rec = fit_chinchilla(epoch_csv(), approach=1, drop_highest_k=5)
    assert 0.3 < rec.params["a"] < 0.8
    assert any("envelope" in w for w in rec.warnings)


def test_synthetic_recovery_within_intervals():
    df = chinchilla_table(budgets=(1e17, 3e17, 1e18, 3e18, 1e19, 3e19, 1e20), noise=0.005, seed=0)
    rec = fit_chinchilla(df, bootstrap=30, seed=0, top_k=8)
    truth = {"E": 1.8, "A": 480.0, "B": 2100.0, "alpha": 0.35, "beta": 0.37, "a": TRUE_CHINCHILLA.a}
    for k, v in truth.items():
        lo, hi = rec.intervals[k]
        assert lo <= v <= hi, (k, v, lo, hi)
    rec2 = fit_chinchilla(df, approach=2)
    assert abs(rec2.params["a"] - TRUE_CHINCHILLA.a) < 0.03


def test_noiseless_synthetic_exact():
    df = chinchilla_table(noise=0.0, budgets=(1e17, 1e18, 1e19, 1e20))
    rec = fit_chinchilla(df, top_k=8)
    assert rec["objective"] < 1e-12
    for k in ("E", "alpha", "beta"):
        assert rec.params[k] == pytest.approx(getattr(TRUE_CHINCHILLA, k), rel=1e-4)


def test_one_D_is_flagged_not_identified():
    rng = np.random.default_rng(0)
    N = np.geomspace(1e7, 1e9, 12)
    import pandas as pd

    df = pd.DataFrame(
        {"N": N, "D": 1e10, "loss": TRUE_CHINCHILLA.predict(N, 1e10) * np.exp(0.003 * rng.standard_normal(12))}
    )
    rec = fit_chinchilla(df, top_k=8)
    assert any("not identified" in w and "same D" in w for w in rec.warnings)


def test_holdout_largest_and_drop_highest():
    df = chinchilla_table(budgets=(1e17, 1e18, 1e19, 1e20), noise=0.003)
    rec = fit_chinchilla(df, holdout="largest", holdout_fraction=0.2, top_k=8)
    ho = rec["holdout"]
    # the largest compute budget is held out whole (not the top 20% by N, which spans budgets)
    assert ho["n_points"] == int((df.flops == 1e20).sum()) == 9
    assert rec["n_points"] == len(df) - ho["n_points"]
    assert ho["C_min"] == pytest.approx(1e20, rel=1e-6) and "largest compute budget" in ho["rule"]
    assert rec["data_range"]["C"][1] == pytest.approx(1e19, rel=1e-6)
    assert ho["quantity"] == "loss" and ho["mean_abs_rel_error"] < 0.02
    full = fit_chinchilla(epoch_csv(), drop_highest_k=5, top_k=8)
    assert full["settings"]["drop_highest"] == 5


def test_record_roundtrip(tmp_path, epoch_fit):
    path = epoch_fit.save(tmp_path / "fit.json")
    back = FitRecord.load(path)
    assert back.params == pytest.approx(epoch_fit.params)
    law = back.law()
    assert isinstance(law, ChinchillaLaw)
    n, d = law.compute_optimal(5.76e23)
    assert 5e10 < n < 1e11 and d / n == pytest.approx(18.4, rel=0.05)  # SCALING_LAWS.md, reproduced


def test_holdout_for_frontier_approaches_reports_n_opt_error():
    truth = ChinchillaLaw(E=1.8, A=480.0, B=2100.0, alpha=0.35, beta=0.37)
    df = chinchilla_table(truth, budgets=(1e17, 1e18, 1e19, 1e20), n_per_budget=7, noise=0.0)
    rec = fit_chinchilla(df, approach=2, holdout="largest")
    ho = rec["holdout"]
    assert ho["quantity"] == "N_opt" and ho["n_points"] == 7
    (pt,) = ho["points"]
    assert pt["C"] == pytest.approx(1e20, rel=1e-6)
    # noise-free data on the true law: the frontier fitted on 3 budgets predicts the 4th budget's vertex
    assert abs(pt["rel_error"]) < 0.1 and ho["mean_abs_rel_error"] == pytest.approx(abs(pt["rel_error"]))
    assert "holdout" in rec.summary() and "N_opt mean |rel err|" in rec.summary()


def test_bound_hit_is_warned():
    # no irreducible loss at all: the fit drives log E to its lower bound and must say so
    truth = ChinchillaLaw(E=0.0, A=480.0, B=2100.0, alpha=0.35, beta=0.37)
    df = chinchilla_table(truth, noise=0.0, budgets=(1e17, 1e18, 1e19))
    rec = fit_chinchilla(df, top_k=8)
    assert any("bound" in w and w.startswith("parameter e") for w in rec.warnings), rec.warnings


def test_bound_hits_in_bootstrap_resamples_are_said():
    truth = ChinchillaLaw(E=0.0, A=480.0, B=2100.0, alpha=0.35, beta=0.37)
    rec = fit_chinchilla(chinchilla_table(truth, noise=0.0, budgets=(1e17, 1e18, 1e19)), top_k=8, bootstrap=10)
    hit = [w for w in rec.warnings if w.startswith("E sat on its bound in")]
    assert hit and "of 10 bootstrap resamples" in hit[0] and "not a measurement" in hit[0]
