"""Every ZeRO stage trains and resumes through the same trainer, dense and MoE (one rank here;
two ranks under ZeRO-3 for every router in test_moe_training.py)."""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO, run_cli, tiny_overrides

TINY = str(REPO / "configs/train/tiny.yaml")


TINY_MOE = str(REPO / "configs/train/tiny-moe.yaml")


MOE = {"model.moe.num_experts": 4, "model.moe.top_k": 2, "model.moe.d_ff": 64}


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_zero_stage_trains_and_resumes(kind, stage, tiny_data, tmp_path):
    extra = {
        "train.steps": 8,
        "train.checkpoint_every_steps": 4,
        "train.eval_every_steps": 0,
        "deepspeed.zero_stage": stage,
    }
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
