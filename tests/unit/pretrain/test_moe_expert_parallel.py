"""Expert parallelism applied to a built model (single process parts; the 2-rank launcher run is
in test_moe_training.py)."""

from __future__ import annotations

import pytest
import torch

from models.moe.block import MoEFeedForward
from models.moe.config import MoEConfig
from pretrain.engine.expert_parallel import prepare_moe
from pretrain.errors import ConfigError


def make_block(**kw) -> MoEFeedForward:
    torch.manual_seed(0)
    return MoEFeedForward(16, MoEConfig(**{"num_experts": 4, "top_k": 2, **kw}), d_ff=24)


def test_single_rank_or_ep1_leaves_model_and_groups_alone():
    block = make_block(ep_size=2)
    groups = [{"params": list(block.parameters()), "weight_decay": 0.1}]
    with pytest.warns(UserWarning, match="single rank"):
        assert prepare_moe(block, block.moe_cfg, 1, groups) is groups
    block = make_block()
    assert prepare_moe(block, block.moe_cfg, 4, groups) is groups
    assert block.experts.up_proj.shape[0] == 4 and not hasattr(block.experts.up_proj, "allreduce")


def test_ep_size_must_divide_world_size():
    block = make_block(ep_size=4)
    with pytest.raises(ConfigError, match="ep_size=4 must divide the number of ranks"):
        prepare_moe(block, block.moe_cfg, 6, [])
