"""MoE config validation: clear errors naming the key, exit code 2 from `scalelab train`."""

from __future__ import annotations

import pytest

from pretrain.config.loader import load_train_config
from pretrain.errors import ConfigError
from tests.helpers import REPO

TINY_MOE = REPO / "configs/train/tiny-moe.yaml"


def error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as exc:
        load_train_config(TINY_MOE, list(overrides))
    return str(exc.value)


def test_tiny_moe_config_loads():
    cfg = load_train_config(TINY_MOE, ["model.moe.router=aux_free_bias", "model.moe.capacity_factor=null"])
    assert cfg.model.moe.router == "aux_free_bias" and cfg.model.moe.capacity_factor is None
    assert cfg.model.moe.num_experts == 8 and cfg.model.d_model == 64


def test_top_k_above_num_experts():
    msg = error("model.moe.top_k=9")
    assert "model.moe" in msg and "top_k=9 must be <= model.moe.num_experts=8" in msg


def test_unknown_router_lists_allowed():
    msg = error("model.moe.router=switchy")
    assert "model.moe.router" in msg and "switchy" in msg
    for name in ("softmax_topk", "aux_free_bias", "expert_choice", "sinkhorn"):
        assert name in msg


@pytest.mark.parametrize(
    "override,key",
    [
        ("model.moe.num_experts=0", "model.moe.num_experts"),
        ("model.moe.capacity_factor=-1", "model.moe.capacity_factor"),
        ("model.moe.ep_size=3", "ep_size=3 must divide"),
        ("model.moe.colour=red", "model.moe.colour: unknown key"),
        ("model.moe.score_func=tanh", "model.moe.score_func"),
    ],
)
def test_other_bad_values(override, key):
    assert key in error(override)
