"""Configuration errors: named key, allowed values, exit code 2, nothing written."""

from __future__ import annotations

from tests.helpers import REPO, run_cli
from tests.unit.pretrain.test_config import TINY  # shared with the unit tests


def test_cli_rejects_before_any_work(tmp_path):
    for bad in (["optim.lrr=0.1"], ["model.n_heads=5"], ["data.tokenizer.kind=sentencepiece"], ["train.tokens=lots"]):
        res = run_cli(["train", TINY, *bad, "--run-dir", str(tmp_path / "run")], cwd=tmp_path)
        assert res.returncode == 2, res.stderr
        assert "invalid configuration" in res.stderr
        assert not (tmp_path / "run").exists() and not (tmp_path / "data").exists()


def test_world_size_divisibility_checked_before_work(tmp_path):
    res = run_cli(
        ["train", TINY, "train.micro_batch_size=8", "--run-dir", str(tmp_path / "run")],
        cwd=tmp_path,
        env={"WORLD_SIZE": "3"},
    )
    assert res.returncode == 2
    assert (
        "train.global_batch_size: 16 must be a multiple of train.micro_batch_size (8) x world size (3) = 24"
        in res.stderr
    )
    assert not (tmp_path / "run").exists()


def test_missing_config_file(tmp_path):
    res = run_cli(["train", str(tmp_path / "nope.yaml")], cwd=tmp_path)
    assert res.returncode == 2 and "config file not found" in res.stderr


def test_config_reference_lists_every_key():
    res = run_cli(["config", "reference"], cwd=REPO)
    assert res.returncode == 0
    for key in (
        "`optim.lr`",
        "`train.tokens`",
        "`deepspeed.zero_stage`",
        "`wandb.mode`",
        "`data.tokenizer.vocab_size`",
        "`schedule.decay_shape`",
    ):
        assert key in res.stdout
