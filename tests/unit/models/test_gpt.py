"""GPT shapes, Llama parameter layout and accounting against hand-computed numbers."""

from __future__ import annotations

import math

import pytest
import torch

from models.accounting import model_counts
from models.config import ModelConfig
from models.gpt import GPT, KVCache


def n50k(**kw) -> ModelConfig:
    return ModelConfig(**{"d_model": 48, "n_layers": 2, "n_heads": 4, "vocab_size": 512, "seq_len": 64, **kw})


def test_accounting_by_hand():
    c = model_counts(n50k())
    # d=48, L=2, d_ff = 8*48/3 = 128; attention 4*48^2 = 9216; SwiGLU 3*48*128 = 18432; norms 2*48*2 + 48 = 240
    assert c.non_embedding == 2 * (9216 + 18432) + 240 == 55536
    assert c.embedding == 2 * 512 * 48
    assert c.total == 55536 + 2 * 512 * 48 == 104688
    # 6 * (matmul params incl. output projection) + 12 * L * d * T
    assert c.flops_per_token == 6 * (2 * (9216 + 18432) + 512 * 48) + 12 * 2 * 48 * 64 == 552960


def test_accounting_gqa_and_tied():
    cfg = n50k(n_kv_heads=2, tie_embeddings=True)
    c = model_counts(cfg)
    attn = 48 * 48 * 2 + 2 * 48 * 2 * 12  # q,o full; k,v with 2 heads of 12
    assert c.non_embedding == 2 * (attn + 18432) + 240
    assert c.total == c.non_embedding + 512 * 48  # one shared matrix
    model = GPT(cfg)
    assert sum(p.numel() for p in model.parameters()) == c.total


@pytest.mark.parametrize("kw", [{}, {"n_kv_heads": 2}, {"tie_embeddings": True}, {"d_ff": 100}])
def test_param_count_matches_module(kw):
    cfg = n50k(**kw)
    assert sum(p.numel() for p in GPT(cfg).parameters()) == model_counts(cfg).total


def test_llama_parameter_names_and_shapes():
    sd = GPT(n50k(n_kv_heads=2)).state_dict()
    assert sd["model.embed_tokens.weight"].shape == (512, 48)
    assert sd["model.layers.1.self_attn.k_proj.weight"].shape == (24, 48)
    assert sd["model.layers.0.mlp.gate_proj.weight"].shape == (128, 48)
    assert sd["model.layers.0.mlp.down_proj.weight"].shape == (48, 128)
    assert {
        "model.norm.weight",
        "lm_head.weight",
        "model.layers.0.input_layernorm.weight",
        "model.layers.0.post_attention_layernorm.weight",
    } <= set(sd)


def test_forward_loss_and_init():
    torch.manual_seed(0)
    model = GPT(n50k())
    x = torch.randint(0, 512, (3, 64))
    out = model(x, targets=x)
    assert out.logits.shape == (3, 64, 512)
    # Fresh init predicts nearly uniformly: loss close to ln(vocab).
    assert abs(out.loss.item() - math.log(512)) < 0.1
    std_out = model.model.layers[0].self_attn.o_proj.weight.std().item()
    assert abs(std_out - 0.02 / math.sqrt(4)) < 0.003  # residual projections scaled by 1/sqrt(2L)


def test_causality_and_kv_cache():
    torch.manual_seed(0)
    model = GPT(n50k()).eval()
    x = torch.randint(0, 512, (2, 20))
    full = model(x).logits
    y = x.clone()
    y[:, 15:] = 7  # changing the future must not change the past
    assert torch.allclose(model(y).logits[:, :15], full[:, :15])
    caches = [KVCache() for _ in range(2)]
    prefill = model(x[:, :12], kv_caches=caches).logits
    steps = [model(x[:, i : i + 1], kv_caches=caches).logits for i in range(12, 20)]
    inc = torch.cat([prefill, *steps], dim=1)
    assert (inc - full).abs().max() < 1e-5


def test_invalid_shapes_rejected():
    with pytest.raises(ValueError, match="must divide"):
        ModelConfig(d_model=50, n_layers=1, n_heads=4)
    with pytest.raises(ValueError, match="even for RoPE"):
        ModelConfig(d_model=36, n_layers=1, n_heads=4)


def test_priced_only_architectures_are_never_built_as_llama_attention():
    """model.mla / model.mtp_depth are counted and priced, not built: the module refuses them by name."""
    with pytest.raises(ValueError, match="model.mtp_depth: not built"):
        GPT(ModelConfig(d_model=32, n_layers=1, n_heads=4, vocab_size=64, mtp_depth=1))
