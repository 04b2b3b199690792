"""The MoE summary of a model (counts and routing), for runs' summaries and the MoE fits.

The counts themselves live in `models.accounting` (one `count` for dense and MoE):

Per MoE layer: total = E * 3*d*d_ff (routed) + S * 3*d*d_ff (shared) + d*E (router);
active = k * 3*d*d_ff + S * 3*d*d_ff + d*E: the router runs for every token and each token
uses k routed experts (nominal k; capacity dropping can only lower it, expert_choice averages
k*capacity_factor). Dense layers count 3*d*ffn_dim. Training FLOPs per token follow as
6 * active matmul parameters in `models.accounting`.
"""

from __future__ import annotations

from typing import Any

from models.accounting import model_counts
from models.config import ModelConfig


def moe_summary(cfg: ModelConfig, vocab_size: int | None = None) -> dict:
    """What a run's model is, as the MoE scaling laws read it (summary.json's `moe` section).

    Parameter counts (total, active, embedding, non-embedding, active non-embedding) and the MoE
    shape: experts E, top_k, granularity G = dense d_ff / expert d_ff, expansion E / G (routed
    expert parameters per MoE layer over one dense FFN: Krajewski et al.'s expansion rate), shared
    experts and capacity factor (null: dropless; expert_choice's default is 1.0). A dense config
    reads as E = 1, G = 1, top_k = 1, so dense and MoE runs sit in one table. Torch-free.
    """
    c = model_counts(cfg, vocab_size)
    dense_d_ff = cfg.ffn_dim
    out: dict[str, Any] = {
        "params": c.total,
        "active_params": c.active,
        "embedding_params": c.embedding,
        "non_embedding_params": c.non_embedding,
        "active_non_embedding_params": c.active_non_embedding,
    }
    moe = cfg.moe
    if moe is None:
        out.update(
            experts=1,
            top_k=1,
            granularity=1.0,
            expansion=1.0,
            expert_d_ff=dense_d_ff,
            dense_d_ff=dense_d_ff,
            shared_experts=0,
            capacity_factor=None,
            router=None,
            moe_layers=0,
        )
        return out
    expert_d_ff = moe.d_ff or dense_d_ff
    capacity = moe.capacity_factor if moe.capacity_factor is not None or moe.router != "expert_choice" else 1.0
    g = dense_d_ff / expert_d_ff
    out.update(
        experts=moe.num_experts,
        top_k=moe.top_k,
        granularity=g,
        expansion=moe.num_experts / g,
        expert_d_ff=expert_d_ff,
        dense_d_ff=dense_d_ff,
        shared_experts=moe.num_shared_experts,
        capacity_factor=capacity,
        router=moe.router,
        moe_layers=len(moe.moe_layers(cfg.n_layers)),
    )
    return out
