"""train.activation_checkpointing under bf16 and with 2 ranks (gloo, the deepspeed launcher), through
the CLI: the same step, loss, aux_loss, grad_norm and val_loss as the run without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import REPO, metrics, run_cli, tiny_overrides, two_rank_group

TINY = str(REPO / "configs/train/tiny.yaml")
TINY_MOE = str(REPO / "configs/train/tiny-moe.yaml")
MOE = {"model.moe.num_experts": 4, "model.moe.top_k": 2, "model.moe.d_ff": 32}
COMPARED = ("step", "loss", "aux_loss", "grad_norm", "val_loss")


def _over(tiny_data, kind: str, stage: int, **extra) -> list[str]:
    over = {
        "train.steps": 3,
        "train.eval_every_steps": 3,
        "train.eval_tokens": 1024,
        "train.checkpoint_every_steps": 0,
        "model.n_layers": 2,
        "model.seq_len": 32,
        "train.global_batch_size": 8,
        "train.micro_batch_size": 4,
        "deepspeed.zero_stage": stage,
        **(MOE if kind == "moe" else {}),
        **extra,
    }
    return [*tiny_overrides(tiny_data, **over), "--no-progress"]


def _rows(run: Path) -> list[tuple]:
    return [tuple(r.get(k) for k in COMPARED) for r in metrics(run)]


@pytest.mark.parametrize("stage", [0, 1])
def test_bf16_checkpointed_run_has_identical_losses(stage, tiny_data, tmp_path):
    """bf16 on CPU is slow (no native bf16 matmuls): 3 steps of a 2-layer model at seq 32."""
    cfg = TINY
    rows = {}
    for name, extra in (("plain", {}), ("ckpt", {"train.activation_checkpointing": "full"})):
        res = run_cli(
            ["train", cfg, *_over(tiny_data, "dense", stage, precision="bf16", **extra), "--run-dir", name], tmp_path
        )
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        rows[name] = _rows(tmp_path / name)
    assert len(rows["plain"]) == 3 and rows["plain"][-1][4] is not None
    assert rows["ckpt"] == rows["plain"]  # bitwise: the recomputation repeats the same bf16 kernels


CASES = [("dense", 1, "every_k"), ("dense", 3, "full"), ("moe", 3, "full")]


def _ckpt(mode: str) -> dict:
    extra = {"train.activation_checkpointing": mode}
    if mode == "every_k":
        extra["train.activation_checkpointing_k"] = 2  # block 0 of 2
    return extra


@two_rank_group("act-ckpt")
def _two_rank_jobs(data):
    """Per case, a 2-rank run without and one with activation checkpointing (`--no-progress` is added there)."""
    jobs = []
    for kind, stage, mode in CASES:
        cfg = TINY_MOE if kind == "moe" else TINY
        over = lambda kind=kind, stage=stage, **extra: _over(data, kind, stage, **extra)[:-1]  # noqa: E731
        jobs += [
            {"name": f"{kind}-{stage}-{mode}-plain", "config": cfg, "overrides": over()},
            {"name": f"{kind}-{stage}-{mode}-ckpt", "config": cfg, "overrides": over(**_ckpt(mode))},
        ]
    return jobs


@pytest.mark.parametrize("kind,stage,mode", CASES)
def test_two_rank_checkpointed_run_has_identical_losses(kind, stage, mode, two_rank_runs):
    runs = two_rank_runs["act-ckpt"]
    for which in ("plain", "ckpt"):
        res = runs[f"{kind}-{stage}-{mode}-{which}"]
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    plain, ckpt = (_rows(runs[f"{kind}-{stage}-{mode}-{w}"].run) for w in ("plain", "ckpt"))
    assert len(plain) == 3 and (plain[0][2] is not None) == (kind == "moe")
    assert ckpt == plain  # bitwise: each rank recomputes its own micro-batch with the same fp32 kernels
