"""Inference-aware planning (Sardana et al. 2024): the solvers agree with brute-force grids, the
training-only limit is Chinchilla's closed form, and `scalelab plan` adds the `inference` section."""

from __future__ import annotations

import json

import pytest

from scaling import fit_chinchilla
from scaling.synthetic.runs import chinchilla_table
from tests.helpers import REPO, run_cli


# ---------------------------------------------------------------- the CLI
@pytest.fixture(scope="module")
def fit_json(tmp_path_factory):
    rec = fit_chinchilla(chinchilla_table(noise=0.01), top_k=8, bootstrap=20)
    return str(rec.save(tmp_path_factory.mktemp("fit") / "fit.json"))


def test_plan_target_loss_with_inference_tokens(fit_json):
    r = run_cli(
        [
            "plan",
            "--fit",
            fit_json,
            "--target-loss",
            "2.3",
            "--inference-tokens",
            "1e12",
            "--vocab-size",
            "4096",
            "--json",
        ],
        REPO,
    )
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
    text = run_cli(
        ["plan", "--fit", fit_json, "--target-loss", "2.3", "--inference-tokens", "1e12", "--vocab-size", "4096"], REPO
    ).stdout
    assert "FLOPs in the fit's convention (6ND_total" in text and "saving:" in text and "Sardana" in text


def test_plan_total_budget_with_inference_tokens(fit_json):
    r = run_cli(
        [
            "plan",
            "--fit",
            fit_json,
            "--compute",
            "1e22",
            "--inference-tokens",
            "1e12",
            "--vocab-size",
            "4096",
            "--json",
        ],
        REPO,
    )
    assert r.returncode == 0, r.stderr
    inf = json.loads(r.stdout)["inference"]
    assert inf["total_flops"] == pytest.approx(1e22) and inf["mode"] == "total_compute"
    assert inf["loss_interval"][0] < inf["loss"] < inf["loss_interval"][1]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target-loss", "1.0", "--inference-tokens", "1e12"], "at or below the fit's irreducible loss"),
        (["--target-loss", "2.3"], "--target-loss needs --inference-tokens"),
        (["--target-loss", "2.3", "--compute", "1e21", "--inference-tokens", "1"], "not allowed with"),
        (["--compute", "1e21", "--inference-tokens", "-5"], "--inference-tokens must be >= 0"),
    ],
)
def test_plan_refuses_bad_inference_options(fit_json, args, message):
    r = run_cli(["plan", "--fit", fit_json, "--vocab-size", "4096"] + args, REPO)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_inference_planning_needs_a_loss_law(tmp_path):
    rec = fit_chinchilla(chinchilla_table(noise=0.0), approach=2)
    r = run_cli(
        ["plan", "--fit", str(rec.save(tmp_path / "a2.json")), "--target-loss", "2.3", "--inference-tokens", "1e12"],
        REPO,
    )
    assert r.returncode == 2 and "approach-3" in r.stderr


def test_the_inference_run_is_the_cheapest_preset_and_is_what_emit_config_writes(fit_json, tmp_path):
    import yaml

    from scaling.fits.record import FitRecord
    from scaling.planning.run_model import model_presets

    cfg = tmp_path / "next.yaml"
    r = run_cli(
        [
            "plan",
            "--fit",
            fit_json,
            "--target-loss",
            "2.6",
            "--inference-tokens",
            "1e11",
            "--vocab-size",
            "4096",
            "--json",
            "--emit-config",
            str(cfg),
        ],
        REPO,
    )
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
