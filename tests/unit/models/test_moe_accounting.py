"""MoE parameter and FLOP accounting against hand-computed numbers (and the built model)."""

from __future__ import annotations

from models.accounting import model_counts
from models.config import ModelConfig
from models.gpt import GPT


def cfg(**moe) -> ModelConfig:
    base = {"num_experts": 8, "top_k": 2, "d_ff": 96, "num_shared_experts": 1, "every_k_layers": 2}
    return ModelConfig(d_model=64, n_layers=4, n_heads=4, vocab_size=512, seq_len=64, moe=base | moe)


def test_counts_by_hand():
    # expert = 3*64*96 = 18432; router = 64*8 = 512; MoE layers 1 and 3, dense layers 0 and 2
    # with d_ff = 192 (8/3*64 rounded up to 32): 3*64*192 = 36864.
    moe_total = 8 * 18432 + 18432 + 512  # 166400
    moe_active = 2 * 18432 + 18432 + 512  # 55808
    attn, norms, emb = 4 * 64 * 64, 2 * 64 * 4 + 64, 512 * 64
    c = model_counts(cfg())
    assert c.non_embedding == 4 * attn + 2 * moe_total + 2 * 36864 + norms == 472640
    assert c.total == 472640 + 2 * emb
    assert c.active_non_embedding == 4 * attn + 2 * moe_active + 2 * 36864 + norms == 251456
    assert c.active == 251456 + 2 * emb
    assert c.flops_per_token == 6 * (251456 - norms + emb) + 12 * 4 * 64 * 64 == 1898496


def test_total_matches_built_model():
    for moe in ({}, {"router": "aux_free_bias", "every_k_layers": 1}, {"num_shared_experts": 0}):
        c = cfg(**moe)
        assert model_counts(c).total == sum(p.numel() for p in GPT(c).parameters())


def test_expert_choice_active_uses_capacity_factor():
    c = model_counts(cfg(router="expert_choice", capacity_factor=1.5))
    # k * cf = 3 experts per token on average in each MoE layer
    assert c.active_non_embedding == 4 * 16384 + 2 * (3 * 18432 + 18432 + 512) + 2 * 36864 + 576


def test_dense_equivalent_of_tiny_moe():
    """tiny-moe's 2 x 96 active expert width equals the dense n200k FFN (192): equal active params
    up to the router."""
    dense = ModelConfig(d_model=64, n_layers=4, n_heads=4, vocab_size=4096)
    moe = ModelConfig(
        d_model=64, n_layers=4, n_heads=4, vocab_size=4096, moe={"num_experts": 8, "top_k": 2, "d_ff": 96}
    )
    assert model_counts(moe).active - model_counts(dense).active == 4 * 64 * 8
    assert model_counts(moe).total > 3 * model_counts(dense).non_embedding


def test_moe_summary_shape_and_counts():
    """summary.json's `moe` section: the counts of `count` and the shape the MoE laws read."""
    from models.moe.accounting import moe_summary

    c = cfg(num_shared_experts=0, capacity_factor=1.25)
    s = moe_summary(c)
    n = model_counts(c)
    assert (
        s["params"],
        s["active_params"],
        s["embedding_params"],
        s["non_embedding_params"],
        s["active_non_embedding_params"],
    ) == (n.total, n.active, n.embedding, n.non_embedding, n.active_non_embedding)
    # dense d_ff 192, expert d_ff 96: granularity 2; 8 experts of half a dense FFN = expansion 4
    assert (s["experts"], s["top_k"], s["granularity"], s["expansion"], s["expert_d_ff"], s["dense_d_ff"]) == (
        8,
        2,
        2.0,
        4.0,
        96,
        192,
    )
    assert (s["shared_experts"], s["capacity_factor"], s["router"], s["moe_layers"]) == (0, 1.25, "softmax_topk", 2)
    assert moe_summary(cfg(router="expert_choice"))["capacity_factor"] == 1.0  # expert_choice's own default
    dense = moe_summary(ModelConfig(d_model=64, n_layers=4, n_heads=4, vocab_size=512))
    assert (dense["experts"], dense["top_k"], dense["granularity"], dense["moe_layers"]) == (1, 1, 1.0, 0)
    assert dense["active_non_embedding_params"] == dense["non_embedding_params"]


def test_the_moe_layer_count_in_closed_form_matches_the_layer_list():
    from models.moe.config import MoEConfig

    for first in (0, 1, 3):
        for k in (1, 2, 3):
            moe = MoEConfig(num_experts=8, top_k=2, first_dense_layers=first, every_k_layers=k)
            for layers in (0, 1, 2, 5, 61):
                assert moe.n_moe_layers(layers) == len(moe.moe_layers(layers)), (first, k, layers)
