"""Maximum likelihood (`--objective mle`): Epoch's headline fit, the density, sigma, bootstrap, CLI."""

from __future__ import annotations

import numpy as np
import pytest

from scaling import fit_chinchilla
from scaling.core.huber import huber
from scaling.core.likelihood import log_likelihood, log_normaliser, log_pdf, profile_log_sigma
from scaling.fits.chinchilla.huber_fit import Objective
from scaling.laws.loss import ChinchillaLaw
from scaling.synthetic.runs import TRUE_CHINCHILLA, chinchilla_table
from tests.helpers import epoch_csv

EPOCH_NOTEBOOK = {
    "A": 482.006,
    "B": 2085.434,
    "E": 1.81686,
    "alpha": 0.347813,
    "beta": 0.365854,
}  # SCALING_LAWS.md section 2


@pytest.fixture(scope="module")
def epoch_mle():
    return fit_chinchilla(epoch_csv(), drop_highest_k=5, objective="mle")


def test_epoch_mle_matches_published(epoch_mle):
    """Acceptance: Epoch's headline estimates on the 240 points."""
    p = epoch_mle.params
    assert epoch_mle["n_points"] == 240
    assert abs(p["alpha"] - 0.3478) <= 0.002 and abs(p["beta"] - 0.3658) <= 0.002
    assert abs(p["A"] / 482.0 - 1) <= 0.05 and abs(p["B"] / 2085 - 1) <= 0.05
    assert abs(p["E"] - 1.817) <= 0.005
    # and, tighter, every digit the notebook printed (to one unit in the last digit: Epoch's BFGS
    # stopped with "precision loss", so its last digit is not exact)
    for k, unit in (("A", 1e-3), ("B", 1e-3), ("E", 1e-5), ("alpha", 1e-6), ("beta", 1e-6)):
        assert abs(p[k] - EPOCH_NOTEBOOK[k]) <= unit, (k, p[k])
    d = epoch_mle["diagnostics"]
    assert 879.77 <= d["log_likelihood"] < 879.78  # Epoch: 879.77
    assert d["log_sigma"] == pytest.approx(-12.267, abs=1e-3)
    assert p["sigma"] == pytest.approx(np.exp(d["log_sigma"]))
    assert epoch_mle["objective"] == pytest.approx(-d["log_likelihood"])
    assert epoch_mle["settings"]["objective"] == "mle" and epoch_mle["settings"]["delta"] == 1e-3
    assert d["converged"] and d["starts_reaching_best"] >= 2
    assert not [w for w in epoch_mle.warnings if "bound" in w or "converge" in w or "sigma" in w]


def test_default_objective_is_still_the_huber_sum():
    rec = fit_chinchilla(epoch_csv(), drop_highest_k=5, top_k=8)
    assert rec["settings"]["objective"] == "huber" and "sigma" not in rec.params
    assert rec["objective"] <= 0.0010182740 + 1e-9


def test_normaliser_makes_a_density():
    from scipy.integrate import quad

    for delta in (1e-3, 0.3, 2.0):
        z, _ = quad(
            lambda x, delta=delta: np.exp(-huber(np.array(x), delta)),
            -np.inf,
            np.inf,
            points=None,
            limit=400,
            epsabs=0,
            epsrel=1e-10,
        )
        assert np.log(z) == pytest.approx(log_normaliser(delta), rel=1e-8)
        # with a scale: the log-pdf integrates to one
        mass, _ = quad(
            lambda r, delta=delta: np.exp(log_pdf(np.array([r]), np.log(0.1), delta))[0],
            -np.inf,
            np.inf,
            limit=400,
            epsrel=1e-9,
        )
        assert mass == pytest.approx(1.0, rel=1e-6)


def test_profiled_sigma_maximises_the_likelihood():
    from scipy.optimize import minimize_scalar

    r = np.random.default_rng(0).laplace(scale=0.01, size=50)
    for delta in (1e-3, 1.0, 50.0):  # Laplace regime, mixed, Gaussian regime
        ls = profile_log_sigma(r, delta)
        best = minimize_scalar(
            lambda s, delta=delta: -log_likelihood(r, s, delta), bracket=(ls - 1, ls + 1), tol=1e-12
        ).x
        assert ls == pytest.approx(best, abs=1e-5)
    assert profile_log_sigma(r, 1e-3) == pytest.approx(np.log(1e-3 * np.abs(r).mean()))  # sigma = delta * mean|r|
    assert profile_log_sigma(np.zeros(5)) == -np.inf


def test_mle_is_least_absolute_deviations(epoch_mle):
    """At delta = 1e-3 the MLE minimises sum |r|: it beats the Huber optimum and Epoch's own printed
    parameters on that criterion, and sits on a kink (as many zero residuals as parameters)."""
    from scaling.data.datasets import load_epoch_chinchilla

    df = load_epoch_chinchilla(5)
    obj = Objective(df.N, df.D, df.loss)
    th = np.array([epoch_mle["diagnostics"]["theta"][k] for k in ("a", "b", "e", "alpha", "beta")])
    s_mle = np.abs(obj.residuals(th)).sum()
    hub = fit_chinchilla(df, top_k=8)
    th_h = np.array([hub["diagnostics"]["theta"][k] for k in ("a", "b", "e", "alpha", "beta")])
    ep = EPOCH_NOTEBOOK
    th_e = np.array([np.log(ep["A"]), np.log(ep["B"]), np.log(ep["E"]), ep["alpha"], ep["beta"]])
    assert s_mle < np.abs(obj.residuals(th_h)).sum() and s_mle <= np.abs(obj.residuals(th_e)).sum()
    assert np.sum(np.abs(obj.residuals(th)) < 1e-7) >= 5
    for j in range(5):  # a local minimum in every coordinate direction
        for h in (1e-5, -1e-5):
            assert np.abs(obj.residuals(th + h * np.eye(5)[j])).sum() > s_mle
    # Epoch's printed parameters with the profiled sigma give their reported 879.77, not more than ours
    r = obj.residuals(th_e)
    assert log_likelihood(r, profile_log_sigma(r)) <= epoch_mle["diagnostics"]["log_likelihood"]


def test_mle_at_least_as_good_as_epochs_own_optimiser(epoch_mle):
    """Epoch's notebook: BFGS (exact gradient) from Hoffmann's unrounded parameters and log sigma = 0;
    it ends with "precision loss". Ours must reach at least its likelihood."""
    from scipy.optimize import minimize

    from scaling.core.likelihood import neg_log_likelihood
    from scaling.data.datasets import load_epoch_chinchilla

    df = load_epoch_chinchilla(5)
    obj = Objective(df.N, df.D, df.loss)
    f = neg_log_likelihood(obj.residuals, obj.jacobian)
    ref = minimize(f, [6.0073404, 6.0179186, 0.5267228, 0.33917084, 0.2849083, 0.0], jac=True, method="BFGS")
    assert -ref.fun == pytest.approx(879.7731, abs=1e-3)
    assert epoch_mle["diagnostics"]["log_likelihood"] >= -ref.fun - 1e-9


def test_mle_bootstrap_refits_the_likelihood():
    rec = fit_chinchilla(epoch_csv(), drop_highest_k=5, objective="mle", bootstrap=12, seed=1, top_k=8)
    b = rec["bootstrap"]
    assert b["failed"] == 0 and len(b["samples"]["alpha"]) == 12
    assert "maximum likelihood" in b["method"] and "sigma" in b["method"]
    for k in ("alpha", "beta", "E", "sigma"):
        lo, hi = rec.intervals[k]
        assert lo < hi
    assert rec.intervals["alpha"][0] < 0.3478 < rec.intervals["alpha"][1]


def test_mle_bound_and_sigma_warnings():
    truth = ChinchillaLaw(
        E=0.0, A=480.0, B=2100.0, alpha=0.35, beta=0.37
    )  # no irreducible loss: log E runs to its bound
    rec = fit_chinchilla(chinchilla_table(truth, noise=0.0, budgets=(1e17, 1e18, 1e19)), top_k=8, objective="mle")
    assert any(w.startswith("parameter e stopped on its bound") for w in rec.warnings), rec.warnings
    exact = fit_chinchilla(chinchilla_table(noise=0.0), top_k=8, objective="mle")  # noise-free: sigma -> 0
    assert any(w.startswith("sigma not identified") for w in exact.warnings), exact.warnings
    for k in ("E", "alpha", "beta"):
        assert exact.params[k] == pytest.approx(getattr(TRUE_CHINCHILLA, k), rel=1e-6)
