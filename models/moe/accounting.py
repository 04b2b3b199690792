"""Parameter counts of MoE FFNs, for `models.accounting.count` (and so MFU, sweeps and fits).

Per MoE layer: total = E * 3*d*d_ff (routed) + S * 3*d*d_ff (shared) + d*E (router);
active = k * 3*d*d_ff + S * 3*d*d_ff + d*E: the router runs for every token and each token
uses k routed experts (nominal k; capacity dropping can only lower it, expert_choice averages
k*capacity_factor). Dense layers count 3*d*ffn_dim. Training FLOPs per token follow as
6 * active matmul parameters in `models.accounting`.
"""
from __future__ import annotations

from models.accounting import dense_ffn_params
from models.config import ModelConfig


def moe_layer_counts(cfg: ModelConfig) -> tuple[int, int]:
    """(total, active) parameters of one MoE FFN layer."""
    moe = cfg.moe
    d, f = cfg.d_model, moe.d_ff or cfg.ffn_dim
    expert = 3 * d * f
    router = d * moe.num_experts
    shared = moe.num_shared_experts * expert
    k = moe.top_k
    if moe.router == "expert_choice":
        k = k * (moe.capacity_factor or 1.0)
    return moe.num_experts * expert + shared + router, int(round(k * expert)) + shared + router


def moe_ffn_counts(cfg: ModelConfig) -> tuple[int, int]:
    """(total, active) FFN parameters over all layers, MoE and dense."""
    total = active = 0
    moe_total, moe_active = moe_layer_counts(cfg)
    for i in range(cfg.n_layers):
        if cfg.moe.is_moe_layer(i):
            total, active = total + moe_total, active + moe_active
        else:
            total, active = total + dense_ffn_params(cfg), active + dense_ffn_params(cfg)
    return total, active
