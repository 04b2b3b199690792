"""The study's routers end to end through `scalelab train`: sigmoid_threshold with gradient
accumulation resumes bit-exactly after SIGKILL (thresholds, realised FLOPs and routing stability
included), and every new router / the global-batch balance scope records the equal-compute
figures (realised experts per token, realised FLOPs) in metrics.jsonl and summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import REPO, kill_after_step, metrics, run_cli, start, tiny_overrides

TINY_MOE = str(REPO / "configs/train/tiny-moe.yaml")
MOE = {"model.moe.num_experts": 4, "model.moe.top_k": 2, "model.moe.d_ff": 64, "model.moe.capacity_factor": None}
COMPARED = (
    "step",
    "loss",
    "grad_norm",
    "val_loss",
    "val_active_experts",
    "flops_realised",
    "moe/active_experts",
    "moe/threshold_mean",
    "moe/k_frac/k1",
    "moe/routing_change",
    "moe/imbalance_micro",
)
THRESHOLD = {
    "train.steps": 24,
    "train.global_batch_size": 16,  # 2 micro-batches of 8: the controller counts both
    "model.moe.router": "sigmoid_threshold",
    "model.moe.threshold_update_rate": 0.05,
}


def args(data: Path, run: str, **extra) -> list[str]:
    return ["train", TINY_MOE, *tiny_overrides(data, **(MOE | extra)), "--run-dir", run, "--no-progress"]


def test_sigmoid_threshold_trains_and_resumes_exactly(tiny_data, tmp_path):
    ref = run_cli(args(tiny_data, "ref", **THRESHOLD), tmp_path)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    recs = metrics(tmp_path / "ref")
    last = recs[-1]
    assert last["moe/threshold_mean"] != 0  # the controller moved the thresholds
    assert 1.0 <= last["moe/active_experts"] <= 4.0 and "moe/k_std" in last
    assert sum(last[f"moe/k_frac/k{j}"] for j in range(5)) == pytest.approx(1.0)
    assert last["moe/k_frac/k0"] == 0  # threshold_min_experts = 1
    assert 0 <= last["moe/routing_change"] <= 1  # the second evaluation compares with the first
    s = json.loads((tmp_path / "ref/summary.json").read_text())
    assert s["flops_realised"] == pytest.approx(last["flops_realised"])
    assert s["moe"]["active_experts"] == pytest.approx(last["moe/active_experts_run"])
    assert s["moe"]["val_active_experts"] == pytest.approx(last["val_active_experts"])
    per_layer = [last[f"val_active_experts/layer{i}"] for i in (0, 1)]
    assert last["val_active_experts"] == pytest.approx(sum(per_layer) / 2)
    # realised FLOPs = config FLOPs + the experts run beyond (or short of) top_k, at 18 d d_ff per assignment
    per_assignment = 6 * 3 * 48 * 64  # n50k: d_model 48
    tokens = s["tokens"] * 2  # two MoE layers
    expected = s["flops"] + per_assignment * (last["moe/active_experts_run"] - 2) * tokens
    assert s["flops_realised"] == pytest.approx(expected, rel=1e-9)

    run = args(tiny_data, "run", **THRESHOLD)
    kill_after_step(tmp_path / "run", 15, start(run, tmp_path))
    res = run_cli(run, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "resumed from checkpoint step_" in res.stdout
    got = [tuple(r.get(k) for k in COMPARED) for r in metrics(tmp_path / "run")]
    assert got == [tuple(r.get(k) for k in COMPARED) for r in recs]  # bitwise


@pytest.mark.parametrize(
    "extra",
    [
        {"model.moe.router": "relu_l1"},
        {"model.moe.router": "token_hash"},
        {"model.moe.router": "softmax_topk", "model.moe.aux_loss_scope": "global_batch"},
    ],
    ids=["relu_l1", "token_hash", "global_batch"],
)
def test_new_routers_record_realised_compute(tiny_data, tmp_path, extra):
    res = run_cli(args(tiny_data, "r", **{"train.steps": 12, "train.global_batch_size": 16} | extra), tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    last = metrics(tmp_path / "r")[-1]
    s = json.loads((tmp_path / "r/summary.json").read_text())
    for k in ("moe/active_experts", "moe/load_entropy", "moe/dead_experts", "moe/imbalance_micro", "flops_realised"):
        assert k in last, k
    if extra["model.moe.router"] != "relu_l1":  # fixed k, dropless: realised = nominal
        assert last["moe/active_experts"] == 2.0 and s["flops_realised"] == pytest.approx(s["flops"], rel=1e-12)
    else:
        assert last["moe/l1_coef"] > 0
    assert s["moe"]["val_active_experts"] is not None
