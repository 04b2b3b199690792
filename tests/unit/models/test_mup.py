"""models/mup.py: the config keys, the tensor kinds, the init scales and the forward multipliers of
model.parametrization mup; at the base width mup is sp to the bit."""

from __future__ import annotations

import math

import pytest
import torch

from models.config import ModelConfig
from models.gpt import GPT
from models.mup import attention_scale, base_shapes, param_kind, width_mult
from pretrain.config.loader import load_train_config
from pretrain.errors import ConfigError
from tests.helpers import REPO

TINY = str(REPO / "configs/train/tiny.yaml")


def cfg(d_model=32, **kw) -> ModelConfig:
    base = dict(d_model=d_model, n_layers=2, n_heads=4, vocab_size=64, seq_len=16, init_std=0.02)
    return ModelConfig(**(base | kw))


@pytest.mark.parametrize(
    "overrides,expected",
    [
        (["model.parametrization=mu"], "model.parametrization: Input should be 'sp' or 'mup'"),
        (["model.parametrization=mup"], "model.parametrization mup needs model.mup_base_width"),
        (["model.parametrization=mup", "model.mup_base_width=0"], "model.mup_base_width: Input should be greater"),
        (
            ["model.parametrization=mup", "model.mup_base_width=32", "optim.width_lr_ref=32"],
            "optim.width_lr_ref and model.parametrization mup both scale the lr with width",
        ),
    ],
)
def test_bad_values_name_the_key(overrides, expected):
    with pytest.raises(ConfigError) as err:
        load_train_config(TINY, overrides)
    assert expected in str(err.value)


def test_sp_is_the_default_and_records_itself():
    c = load_train_config(TINY, []).model
    assert c.parametrization == "sp" and width_mult(c) == 1.0
    assert base_shapes(c) == {"parametrization": "sp"}


def test_kinds_of_a_tied_moe_model():
    model = GPT(cfg(moe=dict(num_experts=4, top_k=2), tie_embeddings=True, parametrization="mup", mup_base_width=16))
    kinds = {n: param_kind(n, tuple(p.shape)) for n, p in model.named_parameters()}
    assert kinds["model.embed_tokens.weight"] == "vector"  # tied: the head is the embedding
    assert kinds["model.layers.0.self_attn.q_proj.weight"] == "hidden"
    assert kinds["model.layers.0.mlp.experts.gate_proj"] == "hidden"  # (E, d_ff, d) expert stacks
    assert kinds["model.layers.1.mlp.router.weight"] == "hidden"
    assert kinds["model.norm.weight"] == kinds["model.layers.0.input_layernorm.weight"] == "vector"
    assert param_kind("lm_head.weight", (64, 32)) == "output"


def test_init_std_scales_hidden_matrices_by_inverse_sqrt_width_ratio():
    torch.manual_seed(0)
    c = cfg(d_model=256, parametrization="mup", mup_base_width=64)  # width ratio 4: hidden std / 2
    model = GPT(c)
    sd = dict(model.named_parameters())
    std = lambda n: sd[n].std().item()  # noqa: E731
    assert std("model.layers.0.self_attn.q_proj.weight") == pytest.approx(0.01, rel=0.03)
    assert std("model.layers.0.mlp.up_proj.weight") == pytest.approx(0.01, rel=0.03)
    assert std("model.layers.0.self_attn.o_proj.weight") == pytest.approx(0.01 / 2, rel=0.03)  # / sqrt(2 L)
    assert std("model.embed_tokens.weight") == pytest.approx(0.02, rel=0.03)
    assert std("lm_head.weight") == pytest.approx(0.02, rel=0.03)
    assert model.logit_scale == 0.25
    assert attention_scale(c) == pytest.approx(math.sqrt(16) / 64)  # base head dim 64/4


@pytest.mark.parametrize("tie", [False, True])
def test_at_the_base_width_mup_is_sp_to_the_bit(tie):
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
    out = {}
    for par in ("sp", "mup"):
        torch.manual_seed(0)
        model = GPT(cfg(tie_embeddings=tie, parametrization=par, mup_base_width=32, mup_base_head_dim=8))
        out[par] = (model.state_dict(), model(ids).logits)
    assert all(torch.equal(out["sp"][0][k], out["mup"][0][k]) for k in out["sp"][0])
    assert torch.equal(out["sp"][1], out["mup"][1])


def test_mup_scales_the_logits_and_the_attention_scores():
    """The same weights under sp and mup (width ratio 2) differ exactly by the two multipliers."""
    torch.manual_seed(0)
    mup = GPT(cfg(d_model=64, parametrization="mup", mup_base_width=32))
    sp = GPT(cfg(d_model=64))
    sp.load_state_dict(mup.state_dict())
    with torch.no_grad():  # fold mup's 1/head_dim scale into sp's 1/sqrt(head_dim) through q_proj
        for layer in sp.model.layers:
            layer.self_attn.q_proj.weight *= attention_scale(mup.cfg) * math.sqrt(16)
    ids = torch.randint(0, 64, (2, 16))
    torch.testing.assert_close(mup(ids).logits, sp(ids).logits * 0.5, rtol=1e-5, atol=1e-6)
    assert base_shapes(mup.cfg) == {
        "parametrization": "mup",
        "mup_base_width": 32,
        "mup_base_head_dim": 8,
        "mup_width_mult": 2.0,
    }
