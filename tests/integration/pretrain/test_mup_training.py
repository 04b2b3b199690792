"""model.parametrization mup through the trainer: every ZeRO stage, dense and MoE, tied and untied,
trains; the hidden matrices' lr is the schedule's x base_width/d_model on every step, also after a
resume (which reproduces the uninterrupted run bit for bit); summary.json records the base shapes;
two ranks under ZeRO-3 and ZeRO-2 + expert parallelism; muon."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import REPO, metrics, tiny_overrides, two_rank_group
from tests.integration.pretrain.test_callbacks import inprocess

TINY = str(REPO / "configs/train/tiny.yaml")
TINY_MOE = str(REPO / "configs/train/tiny-moe.yaml")
BASE = 16  # n50k has d_model 48: width ratio 3
MUP = {"model.parametrization": "mup", "model.mup_base_width": BASE, "train.eval_every_steps": 0}
MOE = {"model.moe.num_experts": 4, "model.moe.top_k": 2, "model.moe.d_ff": 64}
KINDS = {"dense-tied": (TINY, {"model.tie_embeddings": True}), "moe-untied": (TINY_MOE, MOE)}


def by_name(groups: list[dict]) -> dict[str, dict]:
    return {g["name"]: g for g in groups}


def check_groups(groups: list[dict], weight_decay: float = 0.1) -> None:
    g = by_name(groups)
    assert g["hidden"]["lr"] == pytest.approx(g["decay"]["lr"] * BASE / 48, rel=1e-12)
    assert g["no_decay"]["lr"] == g["decay"]["lr"] and g["no_decay"]["weight_decay"] == 0.0
    # lr x weight decay (torch's per-step decay) as at the base width
    assert g["hidden"]["weight_decay"] * g["hidden"]["lr"] == pytest.approx(weight_decay * g["decay"]["lr"])


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_zero_stage_trains_with_mup_groups_and_resumes_exactly(kind, stage, tiny_data, tmp_path):
    config, extra = KINDS[kind]
    over = tiny_overrides(
        tiny_data, **{"train.steps": 6, "train.checkpoint_every_steps": 3, "deepspeed.zero_stage": stage} | MUP | extra
    )
    full = inprocess(tmp_path / "full", over, config=config)
    assert full["rc"] == 0, full["stdout"][-2000:]
    check_groups(full["groups"])
    s = json.loads((tmp_path / "full" / "summary.json").read_text())
    assert s["parametrization"] == "mup"
    assert s["mup"] == {"mup_base_width": BASE, "mup_base_head_dim": BASE // 4, "mup_width_mult": 3.0}
    losses = [r["loss"] for r in metrics(tmp_path / "full")]
    assert len(losses) == 6 and losses[-1] < losses[0]
    # as if killed after the step-3 checkpoint: the same command resumes and ends on the same bits
    shutil.copytree(tmp_path / "full", tmp_path / "resumed")
    shutil.rmtree(tmp_path / "resumed" / "checkpoints" / "step_6")
    (tmp_path / "resumed" / "summary.json").unlink()
    res = inprocess(tmp_path / "resumed", over, config=config)
    assert res["rc"] == 0 and "resumed from checkpoint step_3" in res["stdout"], res["stdout"][-2000:]
    check_groups(res["groups"])
    assert [r["loss"] for r in metrics(tmp_path / "resumed")] == losses


def test_sp_keeps_its_two_groups_and_records_sp(tiny_data, tmp_path):
    r = inprocess(tmp_path / "sp", tiny_overrides(tiny_data, **{"train.steps": 2, "train.eval_every_steps": 0}))
    assert r["rc"] == 0
    assert [(g["name"], g["lr_mult"]) for g in r["groups"]] == [("decay", 1.0), ("no_decay", 1.0)]
    s = json.loads((tmp_path / "sp" / "summary.json").read_text())
    assert s["parametrization"] == "sp" and "mup" not in s


def test_muon_scales_its_adamw_routers_and_keeps_spectral_muon_lr(tiny_data, tmp_path):
    """match_rms_adamw gives Muon AdamW's per-entry scale, hence AdamW's 1/width; `original` is
    spectral and width-free (models/mup.py muon_lr_mult)."""
    for adjust, mult in (("match_rms_adamw", BASE / 48), ("original", 1.0)):
        over = tiny_overrides(
            tiny_data,
            **{"train.steps": 2, "optim.name": "muon", "optim.muon_adjust_lr": adjust} | MUP | MOE,
        )
        r = inprocess(tmp_path / adjust, over, config=TINY_MOE)
        assert r["rc"] == 0, r["stdout"][-2000:]
        g = by_name(r["groups"])
        assert g["muon"]["lr"] == pytest.approx(g["adamw_decay"]["lr"] * mult, rel=1e-12)
        assert g["adamw_hidden"]["lr"] == pytest.approx(g["adamw_decay"]["lr"] * BASE / 48, rel=1e-12)


def _two_rank_overrides(data: Path, stage: int, **extra) -> list[str]:
    return tiny_overrides(
        data,
        **{"train.steps": 6, "train.checkpoint_every_steps": 3, "train.global_batch_size": 16}
        | {"deepspeed.zero_stage": stage}
        | MUP
        | extra,
    )


@two_rank_group("mup")
def _mup_two_rank_jobs(data: Path) -> list[dict]:
    """ZeRO-3 dense tied (partitioned at build: zero.Init) and its resume; ZeRO-2 MoE with EP=2 (DeepSpeed
    re-splits the groups into expert and non-expert groups: the multipliers must follow)."""
    z3 = _two_rank_overrides(data, 3, **{"model.tie_embeddings": True, "deepspeed.zero_init": True})
    ep = _two_rank_overrides(data, 2, **(MOE | {"model.moe.ep_size": 2}))
    return [
        {"name": "z3", "config": TINY, "overrides": z3},
        {
            "name": "z3-resumed",
            "config": TINY,
            "overrides": z3,
            "copy": ["z3", "z3-resumed"],
            "remove": ["z3-resumed/checkpoints/step_6", "z3-resumed/summary.json"],
        },
        {"name": "ep2", "config": TINY_MOE, "overrides": ep},
    ]


def test_two_ranks_zero3_and_expert_parallel_train_and_resume_exactly(two_rank_runs):
    runs = two_rank_runs["mup"]
    for name in ("z3", "z3-resumed", "ep2"):
        assert runs[name].returncode == 0, runs[name].stdout[-3000:] + runs[name].stderr[-3000:]
        assert json.loads((runs[name].run / "summary.json").read_text())["mup"]["mup_width_mult"] == 3.0
    assert "resumed from checkpoint step_3" in runs["z3-resumed"].stdout
    full = [r["loss"] for r in metrics(runs["z3"].run)]
    assert len(full) == 6 and full[-1] < full[0]
    assert [r["loss"] for r in metrics(runs["z3-resumed"].run)] == full
