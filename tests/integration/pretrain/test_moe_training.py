"""MoE end to end through `scalelab train` on the real corpus: loss falls, router metrics in
metrics.jsonl, exact resume after SIGKILL, and expert parallelism (EP=2, 2 ranks under the
`deepspeed` launcher) matching EP=1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import (
    REPO,
    free_port,
    kill_after_step,
    metrics,
    run_cli,
    spawn,
    start,
    tiny_overrides,
    two_rank_group,
)

TINY_MOE = str(REPO / "configs/train/tiny-moe.yaml")
MOE = {"model.moe.num_experts": 4, "model.moe.top_k": 2, "model.moe.d_ff": 64, "model.moe.capacity_factor": 1.25}
COMPARED = (
    "step",
    "loss",
    "grad_norm",
    "aux_loss",
    "val_loss",
    "moe/imbalance",
    "moe/layer1/load/expert0",
    "moe/dropped_frac",
    "moe/bias_norm",
)


def comparable(run: Path) -> list[tuple]:
    return [tuple(r.get(k) for k in COMPARED) for r in metrics(run)]


def moe_args(data: Path, run: str, **extra) -> list[str]:
    return ["train", TINY_MOE, *tiny_overrides(data, **(MOE | extra)), "--run-dir", run, "--no-progress"]


@pytest.fixture(scope="module")
def moe_reference(tiny_data, tmp_path_factory):
    """An uninterrupted 36-step aux_free_bias MoE run (its bias buffers must survive resume)."""
    cwd = tmp_path_factory.mktemp("moe")
    res = run_cli(
        moe_args(
            tiny_data,
            "ref",
            **{"train.steps": 36, "model.moe.router": "aux_free_bias", "model.moe.bias_update_rate": 0.01},
        ),
        cwd,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return cwd / "ref"


def test_moe_loss_falls_and_router_metrics_logged(moe_reference):
    recs = metrics(moe_reference)
    first, last = sum(r["loss"] for r in recs[:3]) / 3, sum(r["loss"] for r in recs[-3:]) / 3
    assert first > 6.0 and last < first - 0.8, (first, last)  # ln(512) = 6.24 at init
    for r in recs:
        for i in (0, 1):  # n50k: 2 layers, both MoE
            for k in ("imbalance", "cv", "dropped_frac", "entropy", "aux_loss", "z_loss", "bias_norm"):
                assert f"moe/layer{i}/{k}" in r, k
            assert sum(r[f"moe/layer{i}/load/expert{j}"] for j in range(4)) == pytest.approx(1.0)
        for k in ("moe/imbalance", "moe/dropped_frac", "moe/aux_loss", "moe/z_loss", "moe/entropy"):
            assert k in r
        assert r["aux_loss"] >= 0
    assert recs[-1]["moe/bias_norm"] > 0  # the bias was updated after optimizer steps
    summary = json.loads((moe_reference / "summary.json").read_text())
    assert summary["status"] == "done"
    from models.accounting import model_counts
    from pretrain.config.loader import load_train_config

    cfg = load_train_config(moe_reference / "config.yaml")
    assert summary["params"] == model_counts(cfg.model).total


def test_moe_exact_resume_after_sigkill(moe_reference, tiny_data, tmp_path):
    args = moe_args(
        tiny_data, "run", **{"train.steps": 36, "model.moe.router": "aux_free_bias", "model.moe.bias_update_rate": 0.01}
    )
    kill_after_step(tmp_path / "run", 15, start(args, tmp_path))
    res = run_cli(args, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "resumed from checkpoint step_" in res.stdout
    assert comparable(tmp_path / "run") == comparable(moe_reference)  # bitwise, router metrics included


def launch(over: list[str], run: str, cwd: Path, port: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    launcher = Path(sys.executable).parent / "deepspeed"
    return subprocess.run(
        [
            str(launcher),
            "--num_gpus",
            "2",
            "--master_port",
            str(port),
            "--module",
            "pretrain.cli",
            TINY_MOE,
            *over,
            "--run-dir",
            run,
            "--no-progress",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


EP_BASE = {
    "train.steps": 12,
    "train.global_batch_size": 16,
    "deepspeed.zero_stage": 1,
    "model.moe.router": "aux_free_bias",
    "model.moe.bias_update_rate": 0.01,
}


def ep_overrides(data: Path, ep: int) -> list[str]:
    return tiny_overrides(data, **(MOE | EP_BASE | {"model.moe.ep_size": ep}))


@two_rank_group("moe-ep")
def _ep_jobs(data):
    return [{"name": f"ep{ep}", "config": TINY_MOE, "overrides": ep_overrides(data, ep)} for ep in (1, 2)]


@pytest.mark.slow
def test_expert_parallel_two_ranks_matches_ep1_and_resumes_exactly(tiny_data, tmp_path, two_rank_runs):
    r1, r2 = (two_rank_runs["moe-ep"][n] for n in ("ep1", "ep2"))
    assert r1.returncode == 0, r1.stdout[-3000:] + r1.stderr[-3000:]
    assert r2.returncode == 0, r2.stdout[-3000:] + r2.stderr[-3000:]
    ep2 = ep_overrides(tiny_data, 2)
    m1, m2 = metrics(r1.run), metrics(r2.run)
    assert len(m1) == len(m2) == 12
    for a, b in zip(m1, m2):
        for k in ("loss", "aux_loss", "grad_norm", "moe/imbalance"):
            assert b[k] == pytest.approx(a[k], rel=1e-5, abs=1e-6), (a["step"], k)
    # Expert-parallel checkpoints: DeepSpeed's expert files, one per MoE layer and EP rank, each with
    # that rank's 2 of the 4 experts; the evaluator's loader restacks them in expert order.
    ckpt = sorted((r2.run / "checkpoints").glob("step_*"))[-1]
    files = sorted(ckpt.rglob("layer_*_expert_*_model_states.pt"))
    assert [f.name.split("_mp_rank")[0] for f in files] == [f"layer_{i}_expert_{r}" for i in (0, 1) for r in (0, 1)]
    import torch

    from rundir.weights import load_run

    shard = torch.load(files[1], weights_only=False)
    assert {k: v.shape[0] for k, v in shard.items()} == {
        f"model.layers.0.mlp.experts.deepspeed_moe.experts.deepspeed_experts.1.{w}": 2
        for w in ("gate_proj", "up_proj", "down_proj")
    }
    a, b = load_run(r1.run).model, load_run(r2.run).model
    for name, w in a.state_dict().items():  # the same training to float precision, experts in the same order
        assert torch.allclose(b.state_dict()[name], w, atol=1e-4), name
    # Kill an EP=2 run after its step-6 checkpoint and resume it: identical to the uninterrupted one.
    launcher = Path(sys.executable).parent / "deepspeed"
    cmd = [
        str(launcher),
        "--num_gpus",
        "2",
        "--master_port",
        str(free_port()),
        "--module",
        "pretrain.cli",
        TINY_MOE,
        *ep2,
        "--run-dir",
        "ep2k",
        "--no-progress",
    ]
    kill_after_step(tmp_path / "ep2k", 8, spawn(cmd, tmp_path, {"OMP_NUM_THREADS": "1"}))
    r3 = launch(ep2, "ep2k", tmp_path, free_port())
    assert r3.returncode == 0, r3.stdout[-3000:] + r3.stderr[-3000:]
    assert "resumed from checkpoint step_" in r3.stdout + r3.stderr
    assert [tuple(r.get(k) for k in COMPARED) for r in metrics(tmp_path / "ep2k")] == [
        tuple(r.get(k) for k in COMPARED) for r in m2
    ]


# every router, and softmax_topk's global-batch balance scope (its loads summed over the 2 ranks in
# the forward): one launch trains them all
ROUTER_CASES = [
    "softmax_topk",
    "aux_free_bias",
    "expert_choice",
    "sinkhorn",
    "relu_l1",
    "token_hash",
    "sigmoid_threshold",
    "softmax_topk+global_batch",
]


def zero3_overrides(data: Path, case: str) -> list[str]:
    router, _, scope = case.partition("+")
    return tiny_overrides(
        data,
        **(
            MOE
            | {
                "train.steps": 6,
                "train.checkpoint_every_steps": 3,
                "train.global_batch_size": 16,
                "train.eval_every_steps": 3,
                "train.eval_tokens": 17 * 64,
                "deepspeed.zero_stage": 3,
                "model.moe.router": router,
                "model.moe.bias_update_rate": 0.01,
            }
            | ({"model.moe.aux_loss_scope": scope} if scope else {})
        ),
    )


@two_rank_group("moe-zero3")
def _zero3_jobs(data):
    """Per router: a 6-step ZeRO-3 run, then a copy of it without its step-6 checkpoint and summary
    (as if killed after the step-3 checkpoint) resumed by the same command."""
    jobs = []
    for router in ROUTER_CASES:
        over = zero3_overrides(data, router)
        jobs += [
            {"name": router, "config": TINY_MOE, "overrides": over},
            {
                "name": f"{router}-resumed",
                "config": TINY_MOE,
                "overrides": over,
                "copy": [router, f"{router}-resumed"],
                "remove": [f"{router}-resumed/checkpoints/step_6", f"{router}-resumed/summary.json"],
            },
        ]
    return jobs


@pytest.mark.slow
@pytest.mark.parametrize("router", ROUTER_CASES)
def test_zero3_two_ranks_every_router_trains_and_resumes_exactly(router, two_rank_runs):
    """ZeRO-3 frees a module's weights after its call; the router's must come back for backward.

    Held-out evaluation (steps 3 and 6) has 17 windows in batches of 8: rank 0 needs two forwards,
    rank 1 one, and every forward gathers ZeRO-3 weights, so rank 1 runs a masked padding forward."""
    r1, r2 = two_rank_runs["moe-zero3"][router], two_rank_runs["moe-zero3"][f"{router}-resumed"]
    assert r1.returncode == 0, r1.stdout[-3000:] + r1.stderr[-3000:]
    full = comparable(r1.run)
    assert len(full) == 6 and full[-1][1] < full[0][1]
    assert [r["step"] for r in metrics(r1.run) if "val_loss" in r] == [3, 6]
    assert r2.returncode == 0, r2.stdout[-3000:] + r2.stderr[-3000:]
    assert "resumed from checkpoint step_3" in r2.stdout + r2.stderr
    assert comparable(r2.run) == full  # bitwise, router metrics included
