"""Inference-aware planning (Sardana et al. 2024): the solvers agree with brute-force grids, the
training-only limit is Chinchilla's closed form, and `scalelab plan` adds the `inference` section."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import REPO, run_cli
from scaling import fit_chinchilla
from scaling.conventions import TokenCost
from scaling.inference import allocate, best_loss_for_total, chinchilla_for_loss, min_total_for_loss
from scaling.laws import ChinchillaLaw
from scaling.synthetic import chinchilla_table

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
        assert a["inference_flops"] == pytest.approx(2 * a["N"] * T) and a["train_flops"] == pytest.approx(6 * a["N"] * a["D"])
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
    assert a["train_flops"] == pytest.approx(float(cost(a["N"])) * a["D"]) and a["inference_flops"] == pytest.approx(float(cost(a["N"])) * T / 3)


# ---------------------------------------------------------------- the CLI
@pytest.fixture(scope="module")
def fit_json(tmp_path_factory):
    rec = fit_chinchilla(chinchilla_table(noise=0.01), top_k=8, bootstrap=20)
    return str(rec.save(tmp_path_factory.mktemp("fit") / "fit.json"))


def test_plan_target_loss_with_inference_tokens(fit_json):
    r = run_cli(["plan", "--fit", fit_json, "--target-loss", "2.3", "--inference-tokens", "1e12", "--vocab-size", "4096", "--json"], REPO)
    assert r.returncode == 0, r.stderr
    inf = json.loads(r.stdout)["inference"]
    assert {"N", "D", "train_flops", "inference_flops", "total_flops", "chinchilla", "saving"} <= set(inf)
    assert {"N", "D", "total_flops"} <= set(inf["chinchilla"])
    assert inf["total_flops"] == pytest.approx(6 * inf["N"] * inf["D"] + 2 * inf["N"] * 1e12)
    assert inf["chinchilla"]["total_flops"] > inf["total_flops"] and 0 < inf["saving"] < 1
    assert inf["saving"] == pytest.approx(1 - inf["total_flops"] / inf["chinchilla"]["total_flops"])
    assert inf["N_interval"][0] < inf["N"] < inf["N_interval"][1]  # from the fit's bootstrap laws
    assert inf["compute_convention"] == "6ND_total"
    assert json.loads(r.stdout)["compute"] == pytest.approx(inf["train_flops"])  # the plan is made for its training
    text = run_cli(["plan", "--fit", fit_json, "--target-loss", "2.3", "--inference-tokens", "1e12", "--vocab-size", "4096"], REPO).stdout
    assert "FLOPs in the fit's convention (6ND_total" in text and "saving:" in text and "Sardana" in text


def test_plan_total_budget_with_inference_tokens(fit_json):
    r = run_cli(["plan", "--fit", fit_json, "--compute", "1e22", "--inference-tokens", "1e12", "--vocab-size", "4096", "--json"], REPO)
    assert r.returncode == 0, r.stderr
    inf = json.loads(r.stdout)["inference"]
    assert inf["total_flops"] == pytest.approx(1e22) and inf["mode"] == "total_compute"
    assert inf["loss_interval"][0] < inf["loss"] < inf["loss_interval"][1]


@pytest.mark.parametrize("args, message", [
    (["--target-loss", "1.0", "--inference-tokens", "1e12"], "at or below the fit's irreducible loss"),
    (["--target-loss", "2.3"], "--target-loss needs --inference-tokens"),
    (["--target-loss", "2.3", "--compute", "1e21", "--inference-tokens", "1"], "not allowed with"),
    (["--compute", "1e21", "--inference-tokens", "-5"], "--inference-tokens must be >= 0"),
])
def test_plan_refuses_bad_inference_options(fit_json, args, message):
    r = run_cli(["plan", "--fit", fit_json, "--vocab-size", "4096"] + args, REPO)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_inference_planning_needs_a_loss_law(tmp_path):
    rec = fit_chinchilla(chinchilla_table(noise=0.0), approach=2)
    r = run_cli(["plan", "--fit", str(rec.save(tmp_path / "a2.json")), "--target-loss", "2.3", "--inference-tokens", "1e12"], REPO)
    assert r.returncode == 2 and "approach-3" in r.stderr


def test_the_inference_run_is_the_cheapest_preset_and_is_what_emit_config_writes(fit_json, tmp_path):
    import yaml

    from scaling.plan import model_presets
    from scaling.record import FitRecord

    cfg = tmp_path / "next.yaml"
    r = run_cli(["plan", "--fit", fit_json, "--target-loss", "2.6", "--inference-tokens", "1e11", "--vocab-size", "4096",
                 "--json", "--emit-config", str(cfg)], REPO)
    assert r.returncode == 0, r.stderr
    run = json.loads(r.stdout)["inference"]["run"]
    law = FitRecord.load(fit_json).law()
    totals = {}
    for p in model_presets(4096):
        rest = 2.6 - law.E - law.A / p["total"] ** law.alpha
        if rest > 0:
            D = (law.B / rest) ** (1 / law.beta)
            totals[p["name"]] = 6 * p["total"] * (D + 1e11 / 3)
    assert run["preset"] == min(totals, key=totals.get)
    assert run["total_flops"] == pytest.approx(totals[run["preset"]])
    assert law.predict(run["N"], run["tokens"]) == pytest.approx(2.6)
    written = yaml.safe_load(cfg.read_text())
    assert written["model"]["preset"] == run["preset"] and written["train"]["tokens"] == round(run["tokens"])
