"""Inference-aware planning (Sardana et al. 2024): the solvers agree with brute-force grids, the
training-only limit is Chinchilla's closed form, and `scalelab plan` adds the `inference` section."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.core.conventions import TokenCost
from scaling.laws.loss import ChinchillaLaw
from scaling.planning.inference import allocate, best_loss_for_total, chinchilla_for_loss, min_total_for_loss

EPOCH = ChinchillaLaw(E=1.82, A=482.0, B=2085.4, alpha=0.3478, beta=0.3659)  # Besiroglu et al. 2024


def _grid_min_total(law, target, T, k=lambda N: 6.0 * N, n=2500):
    """Brute force over a 2-D (N, D) grid: the cheapest point whose loss reaches the target."""
    N = np.geomspace(1e7, 1e12, n)[:, None]
    D = np.geomspace(1e9, 1e14, n)[None, :]
    F = k(N) * (D + T / 3.0)
    F = np.where(law.predict(N, D) <= target, F, np.inf)
    i, j = np.unravel_index(np.argmin(F), F.shape)
    return float(N[i, 0]), float(D[0, j]), float(F[i, j])


@pytest.mark.parametrize("T", [0.0, 1e11, 2e12, 5e13])
def test_least_total_flops_for_a_loss_matches_a_brute_force_grid(T):
    target = 2.2
    N, D = min_total_for_loss(EPOCH, target, T)
    assert EPOCH.predict(N, D) == pytest.approx(target, rel=1e-9)  # on the iso-loss curve
    gN, gD, gF = _grid_min_total(EPOCH, target, T)
    F = 6 * N * D + 2 * N * T
    assert F <= gF * (1 + 1e-9)  # never worse than the grid's best point
    assert F == pytest.approx(gF, rel=0.01)  # and the grid (step 0.5% in N and D) comes within 1%
    assert N == pytest.approx(gN, rel=0.05)


def test_training_only_limit_is_the_chinchilla_closed_form():
    target = 2.1
    N, D = min_total_for_loss(EPOCH, target, 0.0)
    cN, cD = chinchilla_for_loss(EPOCH, target)
    assert (N, D) == (pytest.approx(cN, rel=1e-6), pytest.approx(cD, rel=1e-6))
    # ... which is the compute-optimal frontier at C = 6 N D
    fN, fD = EPOCH.compute_optimal(6 * cN * cD)
    assert (cN, cD) == (pytest.approx(float(fN), rel=1e-9), pytest.approx(float(fD), rel=1e-9))


def test_serving_more_tokens_means_a_smaller_model_trained_longer_and_saves_flops():
    none, some, many = (allocate(EPOCH, T, None, target_loss=2.2) for T in (0.0, 1e12, 1e14))
    assert none["saving"] == pytest.approx(0.0, abs=1e-9)
    assert none["N"] > some["N"] > many["N"] and none["D"] < some["D"] < many["D"]
    assert 0 < some["saving"] < many["saving"] < 1
    for a, T in ((some, 1e12), (many, 1e14)):
        assert a["inference_flops"] == pytest.approx(2 * a["N"] * T) and a["train_flops"] == pytest.approx(
            6 * a["N"] * a["D"]
        )
        assert a["chinchilla"]["total_flops"] > a["total_flops"]


@pytest.mark.parametrize("T", [0.0, 3e12])
def test_best_loss_for_a_total_budget_matches_a_brute_force_grid_and_is_dual(T):
    F = 1e23
    N, D, L = best_loss_for_total(EPOCH, F, T)
    assert 6 * N * D + 2 * N * T == pytest.approx(F, rel=1e-9)
    grid = np.geomspace(1e8, 1e12, 200001)
    Dg = F / (6 * grid) - T / 3
    Lg = np.where(Dg > 0, EPOCH.predict(grid, np.where(Dg > 0, Dg, 1.0)), np.inf)
    assert L <= Lg.min() + 1e-12 and L == pytest.approx(Lg.min(), abs=1e-9)
    assert N == pytest.approx(grid[np.argmin(Lg)], rel=1e-3)
    # duality: the cheapest model reaching that loss spends exactly the budget
    n2, d2 = min_total_for_loss(EPOCH, L, T)
    assert 6 * n2 * d2 + 2 * n2 * T == pytest.approx(F, rel=1e-6)


def test_another_compute_convention_uses_its_own_token_cost():
    """Under the trainer's FLOPs k(N) != 6 N: training k(N) D, inference k(N)/3 per token."""
    logN = tuple(np.log([1e7, 1e9, 1e11]))
    cost = TokenCost("trainer_flops", "non_embedding", logN, tuple(np.log(6 * np.exp(logN)) + np.log([1.6, 1.2, 1.05])))
    T = 1e12
    N, D = min_total_for_loss(EPOCH, 2.2, T, cost)
    gN, gD, gF = _grid_min_total(EPOCH, 2.2, T, k=cost)
    assert float(cost(N)) * (D + T / 3) == pytest.approx(gF, rel=0.01)
    a = allocate(EPOCH, T, cost, target_loss=2.2)
    assert a["train_flops"] == pytest.approx(float(cost(a["N"])) * a["D"]) and a["inference_flops"] == pytest.approx(
        float(cost(a["N"])) * T / 3
    )
