"""`scalelab train CONFIG --dry-run [--world-size K] [--device NAME]`: validates, builds on the meta
device, prints counts, layout and memory, and runs nothing."""

from __future__ import annotations

import pytest
import yaml

from models.accounting import model_counts
from models.config import ModelConfig
from models.memory import GIB, estimate_memory
from tests.helpers import REPO, scalelab

TINY = str(REPO / "configs/train/tiny.yaml")


def test_small_config_dry_run_prints_counts_and_writes_nothing(tmp_path):
    r = scalelab("train", TINY, "--dry-run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cfg = ModelConfig(**{**yaml.safe_load((REPO / "configs/models/n200k.yaml").read_text()), "vocab_size": 4096})
    c = model_counts(cfg)
    assert f"total {c.total:,}" in r.stdout and f"(built on the meta device: {c.total:,})" in r.stdout
    assert f"training FLOPs per token: {c.flops_per_token:.4g}" in r.stdout
    assert "valid for 1 rank(s); nothing was run" in r.stdout and "fit: yes" in r.stdout  # fp32: this host's memory
    assert list(tmp_path.iterdir()) == []  # no run directory, no prepared data


def test_medium_config_on_eight_gpus_prints_the_estimate_and_a_layout_that_fits(tmp_path):
    design = scalelab(
        "model",
        "design",
        "--params",
        "1.3e9",
        "--vocab-size",
        "50304",
        "--seq-len",
        "2048",
        "--out",
        "m.yaml",
        cwd=tmp_path,
    )
    assert design.returncode == 0, design.stderr
    over = [
        "model=m.yaml",
        "precision=bf16",
        "deepspeed.zero_stage=2",
        "train.micro_batch_size=8",
        "train.global_batch_size=512",
        "train.tokens=2.6e10",
    ]
    r = scalelab("train", TINY, *over, "--dry-run", "--world-size", "8", "--device", "a100-40gb", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    m = ModelConfig(**yaml.safe_load((tmp_path / "m.yaml").read_text()))
    e = estimate_memory(
        m,
        micro_batch_size=8,
        zero_stage=2,
        world_size=8,
        precision="bf16",
        gradient_accumulation_steps=8,
        device_memory_bytes=40 * GIB,
    )
    line = "memory per rank (GiB): " + ", ".join(f"{k} {v / GIB:.2f}" for k, v in e.per_device_bytes.items())
    assert line in r.stdout
    assert "micro-batch 8 x 8 accumulation step(s) = global batch 512" in r.stdout
    assert ("fit: yes" in r.stdout) == e.fits
    if not e.fits:
        assert "a layout that fits: ZeRO-" in r.stdout or "no layout fits" in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml"]


@pytest.mark.parametrize(
    "args, key",
    [
        (["train.micro_batch_size=3"], "train.global_batch_size"),
        (["model.foo=1"], "model.foo"),
        (["train.global_batch_size=16", "--world-size", "3"], "train.global_batch_size"),
        (["deepspeed.extra={zero_optimization: {stage: 7}}"], "deepspeed"),
        (["data.tokenizer.kind=hf", "data.tokenizer.path=tok.json"], "model.vocab_size"),
    ],
)
def test_bad_config_exits_2_naming_the_key(tmp_path, args, key):
    r = scalelab("train", TINY, *args, "--dry-run", cwd=tmp_path)
    assert r.returncode == 2 and key in r.stderr, r.stdout + r.stderr
    assert list(tmp_path.iterdir()) == []


def test_dry_run_options_need_dry_run(tmp_path):
    r = scalelab("train", TINY, "--world-size", "8", cwd=tmp_path)
    assert r.returncode == 2 and "--dry-run" in r.stderr
    assert list(tmp_path.iterdir()) == []
