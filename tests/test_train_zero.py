"""Every ZeRO stage trains and resumes through the same trainer, dense and MoE (one rank here;
two ranks under ZeRO-3 for every router in test_moe_training.py)."""
from __future__ import annotations

import json

import pytest

from conftest import REPO, run_cli, tiny_overrides

TINY = str(REPO / "configs/train/tiny.yaml")
TINY_MOE = str(REPO / "configs/train/tiny-moe.yaml")
MOE = {"model.moe.num_experts": 4, "model.moe.top_k": 2, "model.moe.d_ff": 64}


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_zero_stage_trains_and_resumes(kind, stage, tiny_data, tmp_path):
    extra = {"train.steps": 8, "train.checkpoint_every_steps": 4, "train.eval_every_steps": 0, "deepspeed.zero_stage": stage}
    over = tiny_overrides(tiny_data, **(extra | (MOE if kind == "moe" else {})))
    cfg = TINY_MOE if kind == "moe" else TINY
    res = run_cli(["train", cfg, *over, "--run-dir", "run", "--no-progress"], tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["status"] == "done" and s["steps"] == 8 and s["final_val_loss"] < 6.3
    # Extend the same run by changing nothing but deleting the summary: resume loads the stage's checkpoint.
    (tmp_path / "run" / "summary.json").unlink()
    res = run_cli(["train", cfg, *over, "--run-dir", "run", "--no-progress"], tmp_path)
    assert res.returncode == 0 and "resumed from checkpoint step_8" in res.stdout, res.stdout[-2000:]


def test_cpu_runs_get_small_zero_buckets_and_extra_wins():
    """DeepSpeed's default 5e8-element bucket is reallocated every step on CPU (seconds per tiny
    step): CPU ranks get 5e6; GPU ranks keep DeepSpeed's default; deepspeed.extra overrides both."""
    from pretrain.config.loader import load_train_config
    from pretrain.ds_config import CPU_BUCKET, build_ds_config

    cfg = load_train_config(REPO / "configs/train/tiny.yaml", ["deepspeed.zero_stage=2"])
    cpu, gpu = build_ds_config(cfg, 1, cuda=False), build_ds_config(cfg, 1, cuda=True)
    assert cpu["zero_optimization"] == {"stage": 2, "reduce_bucket_size": CPU_BUCKET, "allgather_bucket_size": CPU_BUCKET}
    assert gpu["zero_optimization"] == {"stage": 2}
    cfg = load_train_config(REPO / "configs/train/tiny.yaml", ["deepspeed.zero_stage=2",
                                                               "deepspeed.extra.zero_optimization.reduce_bucket_size=1000"])
    assert build_ds_config(cfg, 1, cuda=False)["zero_optimization"]["reduce_bucket_size"] == 1000
