"""models/accounting.py's options for what the trainer does not build: multi-head latent attention and
multi-token prediction, checked on DeepSeek-V3's published counts (arXiv:2412.19437: 671B total, 37B
activated per token; its MTP module shares the embedding and head)."""

from __future__ import annotations

import pytest

from models.accounting import MLA, model_counts
from models.config import ModelConfig
from models.moe.config import MoEConfig

DSV3 = ModelConfig(
    d_model=7168, n_layers=61, n_heads=128, d_ff=18432, vocab_size=129280, seq_len=4096,
    moe=MoEConfig(num_experts=256, top_k=8, d_ff=2048, num_shared_experts=1, first_dense_layers=3),
)  # fmt: skip
DSV3_MLA = MLA(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)


def test_deepseek_v3_counts_with_mla():
    c = model_counts(DSV3, mla=DSV3_MLA)
    assert c.total == pytest.approx(671e9, rel=0.002) and c.active == pytest.approx(37e9, rel=0.02)
    # per layer: q down/norm/up, kv down (+ rope key)/norm/up, output
    assert DSV3_MLA.params(7168, 128) == 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + (
        128 * 128 * 7168
    )


def test_mtp_adds_a_block_a_projection_and_a_head_pass():
    c = model_counts(DSV3, mla=DSV3_MLA)
    m = model_counts(DSV3, mla=DSV3_MLA, mtp_depth=1)
    assert 10e9 < m.total - c.total < 15e9  # the report's 14B MTP module less the shared embedding and head
    head = 6 * 129280 * 7168
    assert m.flops_per_token - c.flops_per_token > head
    old = 6 * 37e9 + 12 * 61 * 7168 * 4096  # the active-parameter approximation the issue found 15% low
    assert m.flops_per_token / old == pytest.approx(1.2, abs=0.03)


def test_without_options_the_counts_are_unchanged():
    cfg = ModelConfig(d_model=512, n_layers=4, n_heads=8, vocab_size=1000, seq_len=128)
    std = MLA(None, 0, 0, 0, 0)  # not used: options off take the standard path
    assert model_counts(cfg) == model_counts(cfg, mla=None, mtp_depth=0)
    assert std.q_lora_rank is None
