"""Laws, Kaplan, batch/LR and critical-batch fits on synthetic data with known truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scaling import fit_batch_lr, fit_critical_batch, fit_kaplan
from scaling.laws.hparams import DEEPSEEK_2024, CriticalBatchLaw, StepsExamplesLaw
from scaling.laws.loss import HOFFMANN_2022, KAPLAN_2020_ND, ChinchillaLaw
from scaling.synthetic.runs import batch_lr_sweep, critical_batch_table


def test_compute_optimal_minimises_loss_on_the_budget():
    law = HOFFMANN_2022
    C = 1e22
    n_opt, d_opt = law.compute_optimal(C)
    assert 6 * n_opt * d_opt == pytest.approx(C)
    ns = n_opt * np.geomspace(0.5, 2, 41)
    losses = law.predict(ns, C / (6 * ns))
    assert np.argmin(losses) == 20
    assert law.a == pytest.approx(0.28 / 0.62)


def test_published_constants_sanity():
    lr, b = DEEPSEEK_2024.predict(C=1e20)
    assert lr == pytest.approx(9.86e-4, rel=0.01) and b == pytest.approx(1.02e6, rel=0.02)
    assert CriticalBatchLaw(2e8, 0.21).predict(1.0) == pytest.approx(2e8)
    s = StepsExamplesLaw(S_min=100.0, E_min=1e5)
    assert s.steps(s.B_crit) == pytest.approx(200.0) and s.examples(s.B_crit) == pytest.approx(2e5)
    assert KAPLAN_2020_ND.predict(N=1e9, D=1e12) > 0


def test_batch_lr_compute_form_recovers_deepseek():
    df = batch_lr_sweep(seed=0)
    rec = fit_batch_lr(df, bootstrap=20, seed=0)
    p = rec.params
    assert p["lr_exp_C"] == pytest.approx(-0.125, abs=0.01)
    assert p["bs_exp_C"] == pytest.approx(0.3271, abs=0.01)
    assert rec["diagnostics"]["n_groups"] == 3
    assert set(rec.intervals) >= {"lr_coef", "lr_exp_C", "bs_coef", "bs_exp_C"}
    q = fit_batch_lr(df, optimum="quadratic").params
    assert q["lr_exp_C"] == pytest.approx(-0.125, abs=0.02)


def test_batch_lr_nd_form_and_edge_warning():
    df = batch_lr_sweep(seed=1, lr_mults=(1, 2, 4))  # optimum at the lower edge of the lr grid
    rec = fit_batch_lr(df, form="nd")
    assert set(rec.params) == {"lr_coef", "lr_exp_N", "lr_exp_D", "bs_coef", "bs_exp_D"}
    assert any("edge" in w for w in rec.warnings)
    assert any("collinear" in w for w in rec.warnings)  # compute-optimal (N, D) pairs: N and D move together


def test_critical_batch_recovers_power_law():
    df = critical_batch_table(seed=0)
    rec = fit_critical_batch(df, bootstrap=20)
    assert rec.params["bcrit_exp_N"] == pytest.approx(0.45, abs=0.02)
    for m in rec["models"]:
        assert m["B_crit"] == pytest.approx(50 * m["N"] ** 0.45, rel=0.05)
        assert m["B_crit"] == pytest.approx(m["E_min"] / m["S_min"])
    lo, hi = rec.intervals["bcrit_exp_N"]
    assert lo <= 0.45 <= hi


def test_critical_batch_with_target_loss_fits_kaplan_bcrit():
    df = critical_batch_table(seed=0)
    truth = CriticalBatchLaw(B_star=2e8, alphaB=0.21)
    # give each model the loss at which Kaplan's law yields its B_crit
    df["loss"] = (truth.B_star / (50 * df["N"] ** 0.45)) ** truth.alphaB
    rec = fit_critical_batch(df)
    assert rec.params["alphaB"] == pytest.approx(0.21, rel=0.05)


def test_kaplan_nd_recovers_truth():
    rng = np.random.default_rng(0)
    N = np.repeat(np.geomspace(1e6, 1e9, 8), 5)
    D = np.tile(np.geomspace(1e8, 1e11, 5), 8)
    L = KAPLAN_2020_ND.predict(N=N, D=D) * np.exp(0.001 * rng.standard_normal(N.size))
    rec = fit_kaplan(pd.DataFrame({"N": N, "D": D, "loss": L}), bootstrap=10)
    assert rec.params["alphaN"] == pytest.approx(0.076, rel=0.1)
    assert rec.params["alphaD"] == pytest.approx(0.103, rel=0.1)
    rec_n = fit_kaplan(pd.DataFrame({"N": N, "loss": (8.8e13 / N) ** 0.076}), form="n")
    assert rec_n.params["alphaN"] == pytest.approx(0.076, rel=1e-4)
    assert rec_n.params["Nc"] == pytest.approx(8.8e13, rel=1e-3)


def test_chinchilla_law_vectorised():
    law = ChinchillaLaw(E=1.0, A=1.0, B=1.0, alpha=0.5, beta=0.5)
    assert law.predict(np.array([1.0, 4.0]), 1.0).tolist() == [3.0, 2.5]


def test_batch_lr_nd_form_recovers_step_law():
    from scaling.synthetic.runs import step_law_sweep

    rec = fit_batch_lr(step_law_sweep(seed=0), form="nd", optimum="quadratic", bootstrap=10)
    p = rec.params
    assert p["lr_exp_N"] == pytest.approx(-0.713, abs=0.02)
    assert p["lr_exp_D"] == pytest.approx(0.307, abs=0.02)
    assert p["bs_exp_D"] == pytest.approx(0.571, abs=0.02)
    assert not any("collinear" in w for w in rec.warnings)
    # best run + near-optimal runs: quantised to the factor-2 grid, so only roughly right
    best = fit_batch_lr(step_law_sweep(seed=0), form="nd").params
    assert best["lr_exp_N"] == pytest.approx(-0.713, abs=0.1)
