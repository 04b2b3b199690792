"""Every ZeRO stage trains and resumes through the same trainer, dense and MoE (one rank here;
two ranks under ZeRO-3 for every router in test_moe_training.py)."""

from __future__ import annotations

from tests.helpers import REPO


def test_cpu_runs_get_small_zero_buckets_and_extra_wins():
    """DeepSpeed's default 5e8-element bucket is reallocated every step on CPU (seconds per tiny
    step): CPU ranks get 5e6; GPU ranks keep DeepSpeed's default; deepspeed.extra overrides both."""
    from pretrain.config.loader import load_train_config
    from pretrain.engine.ds_config import CPU_BUCKET, build_ds_config

    cfg = load_train_config(REPO / "configs/train/tiny.yaml", ["deepspeed.zero_stage=2"])
    cpu, gpu = build_ds_config(cfg, 1, cuda=False), build_ds_config(cfg, 1, cuda=True)
    assert cpu["zero_optimization"] == {
        "stage": 2,
        "reduce_bucket_size": CPU_BUCKET,
        "allgather_bucket_size": CPU_BUCKET,
    }
    assert gpu["zero_optimization"] == {"stage": 2}
    cfg = load_train_config(
        REPO / "configs/train/tiny.yaml",
        ["deepspeed.zero_stage=2", "deepspeed.extra.zero_optimization.reduce_bucket_size=1000"],
    )
    assert build_ds_config(cfg, 1, cuda=False)["zero_optimization"]["reduce_bucket_size"] == 1000
