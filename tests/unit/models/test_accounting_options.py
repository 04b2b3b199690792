"""models/accounting.py's counts of what the trainer does not build (`model.mla`, `model.mtp_depth`):
multi-head latent attention and multi-token prediction, checked on DeepSeek-V3's published counts
(arXiv:2412.19437: 671B total, 37B activated per token; its MTP module shares the embedding and head)."""

from __future__ import annotations

import pytest

from models.accounting import mla_params, model_counts
from models.config import ModelConfig
from models.mla_config import MLAConfig
from models.moe.config import MoEConfig

DSV3 = ModelConfig(
    d_model=7168, n_layers=61, n_heads=128, d_ff=18432, vocab_size=129280, seq_len=4096,
    moe=MoEConfig(num_experts=256, top_k=8, d_ff=2048, num_shared_experts=1, first_dense_layers=3),
)  # fmt: skip
DSV3_MLA = MLAConfig(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)


def test_deepseek_v3_counts_with_mla():
    c = model_counts(DSV3.model_copy(update={"mla": DSV3_MLA}))
    assert c.total == pytest.approx(671e9, rel=0.002) and c.active == pytest.approx(37e9, rel=0.02)
    # per layer: q down/norm/up, kv down (+ rope key)/norm/up, output
    q = 7168 * 1536 + 1536 + 1536 * 128 * 192
    kv = 7168 * 576 + 512 + 512 * 128 * 256
    assert mla_params(DSV3_MLA, 7168, 128) == q + kv + 128 * 128 * 7168


def test_mtp_adds_a_block_a_projection_and_a_head_pass():
    c = model_counts(DSV3.model_copy(update={"mla": DSV3_MLA}))
    m = model_counts(DSV3.model_copy(update={"mla": DSV3_MLA, "mtp_depth": 1}))
    assert 10e9 < m.total - c.total < 15e9  # the report's 14B MTP module less the shared embedding and head
    head = 6 * 129280 * 7168
    assert m.flops_per_token - c.flops_per_token > head
    old = 6 * 37e9 + 12 * 61 * 7168 * 4096  # the active-parameter approximation the issue found 15% low
    assert m.flops_per_token / old == pytest.approx(1.2, abs=0.03)


def test_without_options_the_counts_are_the_llama_formula():
    cfg = ModelConfig(d_model=512, n_layers=4, n_heads=8, vocab_size=1000, seq_len=128)
    c = model_counts(cfg)
    assert cfg.mla is None and cfg.mtp_depth == 0 and cfg.priced_only() == []
    per_layer = 4 * 512 * 512 + 3 * 512 * cfg.ffn_dim + 2 * 512
    assert c.total == 4 * per_layer + 512 + 2 * 1000 * 512
    assert c.flops_per_token == 6 * (4 * (per_layer - 2 * 512) + 1000 * 512) + 12 * 4 * 512 * 128
