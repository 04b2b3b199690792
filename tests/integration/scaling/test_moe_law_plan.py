"""`scalelab plan FIT_moe.json --compute C`: the best (N_active, E, G, D) under a law with a known
optimum, the dense optimum and gain beside it, the emitted MoE config, and what is refused."""

from __future__ import annotations

import json

import yaml

from tests.helpers import run_cli
from tests.unit.scaling.test_moe_law_plan import krajewski_fit  # noqa: F401 (shared with the unit tests)


def test_plan_cli_emits_a_config_that_config_show_accepts(krajewski_fit, tmp_path):
    _, path = krajewski_fit
    res = run_cli(
        ["plan", str(path), "--compute", "1e21", "--json", "--emit-config", "moe.yaml", "--out", "plan.json"], tmp_path
    )
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    for key in (
        "compute",
        "law",
        "conventions",
        "N_opt",
        "D_opt",
        "G",
        "E",
        "top_k",
        "loss_at_optimum",
        "dense",
        "gain",
        "compute_multiplier",
        "candidates",
        "run",
        "warnings",
        "emitted_config",
    ):
        assert key in plan, key
    cfg = yaml.safe_load((tmp_path / "moe.yaml").read_text())
    assert cfg["model"]["moe"] == {"num_experts": 64, "top_k": 8, "d_ff": plan["run"]["expert_d_ff"]}
    assert cfg["train"]["tokens"] == round(plan["run"]["tokens"])
    shown = run_cli(["config", "show", "moe.yaml"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    model = yaml.safe_load(shown.stdout)["model"]
    assert model["preset"] == plan["run"]["preset"] and model["moe"]["num_experts"] == 64 and model["moe"]["top_k"] == 8
    text = run_cli(["plan", "--fit", str(path), "--compute", "1e21"], tmp_path)
    assert text.returncode == 0 and "dense optimum (E = 1, G = 1)" in text.stdout and "predicted gain" in text.stdout


def test_plan_refuses_what_an_moe_plan_cannot_do(krajewski_fit, tmp_path):
    _, path = krajewski_fit
    for extra, msg in (
        (["--compute", "1e21", "--device", "h100-sxm"], "--device apply to dense plans only"),
        (["--compute", "1e21", "--compute-kind", "6ND_total"], "differs from the MoE fit's convention"),
        (["--compute", "1e21", "--fit", str(path)], "exactly one fit record"),
    ):
        res = run_cli(["plan", str(path), *extra], tmp_path)
        assert res.returncode == 2 and msg in res.stderr, (extra, res.stderr)
    assert run_cli(["plan", "--compute", "1e21"], tmp_path).returncode == 2  # no fit record at all
