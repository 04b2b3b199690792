"""Cost projections: FLOPs <-> device-hours, days and dollars on the device table, MFU measured
from the run registry, the inverse budget forms, and what `scalelab plan` prints and refuses."""

from __future__ import annotations

import json

import pytest

from scaling import fit_chinchilla
from scaling.planning.cost import DEFAULT_MFU
from tests.helpers import REPO, run_cli, write_isoflop_tree
from tests.unit.scaling.test_cost import H100, priced_run, runs  # noqa: F401 (shared with the unit tests)


@pytest.fixture(scope="module")
def tree_fit_json(tmp_path_factory):
    """A fit in the trainer's FLOPs convention (hardware FLOPs = C), with bootstrap samples."""
    runs = write_isoflop_tree(tmp_path_factory.mktemp("iso"), noise=0.004)
    rec = fit_chinchilla(runs, n_kind="non_embedding", top_k=8, bootstrap=20)
    return str(rec.save(tmp_path_factory.mktemp("fit") / "fit.json"))


def plan_json(fit, *args):
    r = run_cli(["plan", "--fit", fit, "--vocab-size", "512", "--json", *args], REPO)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_plan_cost_section_from_the_cli(tree_fit_json, runs):
    plan = plan_json(
        tree_fit_json,
        "--compute",
        "3e14",
        "--device",
        "h100-sxm",
        "--num-devices",
        "2",
        "--mfu",
        "auto",
        "--runs",
        str(runs),
        "--usd-per-device-hour",
        "3",
    )
    c = plan["cost"]
    assert {"device", "peak_flops", "mfu", "mfu_source", "device_hours", "days", "usd", "tokens_per_s"} <= set(c)
    assert c["device"] == "h100-sxm" and c["mfu"] == pytest.approx(0.36) and c["mfu_source"].startswith("measured")
    assert c["device_hours"] == pytest.approx(3e14 / (H100 * 0.36 * 3600))
    assert c["usd"] == pytest.approx(3 * c["device_hours"]) and c["days"] == pytest.approx(c["device_hours"] / 48)
    lo, hi = c["device_hours_interval"]  # from the MFU spread of the measured runs
    assert lo == pytest.approx(3e14 / (H100 * 0.42 * 3600), rel=0.03) and hi == pytest.approx(
        3e14 / (H100 * 0.30 * 3600), rel=0.03
    )
    text = run_cli(
        [
            "plan",
            "--fit",
            tree_fit_json,
            "--vocab-size",
            "512",
            "--compute",
            "3e14",
            "--device",
            "h100-sxm",
            "--mfu",
            "0.4",
        ],
        REPO,
    ).stdout
    assert "cost assumptions: h100-sxm x 1, bf16 dense peak 989 TFLOP/s" in text and "MFU 0.4 (given (--mfu))" in text
    assert "device-hours:" in text and "no price given" in text and "tokens/s needed" in text


@pytest.mark.parametrize(
    "form, hours",
    [
        (["--device-hours", "5"], 5.0),
        (["--days", "0.5", "--num-devices", "4"], 48.0),
        (["--budget-usd", "100", "--usd-per-device-hour", "4"], 25.0),
    ],
)
def test_inverse_budget_forms_turn_into_compute(tree_fit_json, form, hours):
    plan = plan_json(tree_fit_json, "--device", "l4", "--mfu", "0.3", *form)
    # trainer_flops fit: C = device-hours x 3600 x peak x MFU exactly
    assert plan["compute"] == pytest.approx(hours * 3600 * 121e12 * 0.3)
    assert plan["cost"]["device_hours"] == pytest.approx(hours) and plan["cost"]["budget"][
        "device_hours"
    ] == pytest.approx(hours)
    assert plan["N_opt"] > 0 and "loss" in plan["run"]


def test_budget_without_runs_takes_the_predicted_mfu_with_compute_and_loss_intervals(tree_fit_json, tmp_path):
    plan = plan_json(tree_fit_json, "--device", "h100-sxm", "--device-hours", "1", "--runs", str(tmp_path))
    c = plan["cost"]
    # no finished runs: the step-time model's MFU for the run the budget buys (a tiny model: far from peak),
    # the fixed point reached (the MFU that bought the compute is the one predicted for what it bought)
    assert c["mfu_source"].startswith("predicted")
    assert c["mfu"] == pytest.approx(plan["performance"]["mfu"], rel=0.01)
    assert c["mfu"] < 0.2
    lo, hi = c["compute_interval"]
    assert lo < plan["compute"] < hi and hi / lo == pytest.approx(1.2 / 0.8, rel=0.05)  # the model's +-20%
    assert c["loss_at_optimum_interval"][0] < plan["loss_at_optimum"] < c["loss_at_optimum_interval"][1]
    # a device the step-time model cannot price (no link bandwidths): the stated default
    tpu = plan_json(tree_fit_json, "--device", "tpu-v4", "--device-hours", "1", "--runs", str(tmp_path))["cost"]
    assert tpu["mfu"] == DEFAULT_MFU and "default 0.40" in tpu["mfu_source"]
    lo, hi = tpu["compute_interval"]
    assert hi / lo == pytest.approx(0.495 / 0.305, rel=0.05)


def test_inference_plan_cost_carries_the_bootstrap(tree_fit_json):
    plan = plan_json(
        tree_fit_json, "--target-loss", "3.2", "--inference-tokens", "1e9", "--device", "h100-sxm", "--mfu", "0.4"
    )
    c, inf = plan["cost"], plan["inference"]
    assert c["device_hours"] == pytest.approx(inf["train_flops"] / (H100 * 0.4 * 3600))
    assert c["device_hours_interval"][0] < c["device_hours"] < c["device_hours_interval"][1]  # the fit's spread of N, D


@pytest.mark.parametrize(
    "args, message",
    [
        (["--compute", "1e21", "--device", "h100"], "choose from 'a100-40gb', 'a100-80gb', 'h100-sxm'"),
        (["--compute", "1e21", "--budget-usd", "5"], "not allowed with argument --compute"),
        (["--device-hours", "5"], "--device-hours needs --device"),
        (["--days", "3", "--device", "l4"], "--days needs --num-devices"),
        (["--budget-usd", "5", "--device", "l4"], "--budget-usd needs --usd-per-device-hour"),
        (["--compute", "1e21", "--mfu", "0.4"], "--mfu: applies only with --device"),
        (["--compute", "1e21", "--device", "l4", "--mfu", "1.5"], "--mfu must be 'auto' or a number in (0, 1]"),
        (["--compute", "1e21", "--device", "l4", "--num-devices", "0"], "--num-devices must be >= 1"),
        (
            ["--device-hours", "5", "--device", "l4", "--inference-tokens", "1e9"],
            "--inference-tokens goes with --compute",
        ),
        ([], "one of the arguments --compute --budget-usd --device-hours --days --target-loss --model is required"),
    ],
)
def test_plan_refuses_bad_cost_options(tree_fit_json, args, message):
    r = run_cli(["plan", "--fit", tree_fit_json] + args, REPO)
    assert r.returncode == 2 and message in r.stderr, r.stderr
