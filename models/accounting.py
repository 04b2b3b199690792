"""Parameter and FLOP accounting, computed from the config alone (no torch needed).

Conventions (stated once, used by the logger, sweeps and fits):
- `total`: every trainable parameter.
- `non_embedding`: total minus the token embedding and the output projection (Kaplan's N).
- `active`: parameters touched per token (differs from total only for MoE).
- `flops_per_token`: training FLOPs per token = 6 * (active matmul parameters, output projection
  included) + 12 * n_layers * d_model * seq_len for attention scores and values (PaLM/nanoGPT
  convention: the causal mask is not subtracted). Forward only is one third of that.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from models.config import ModelConfig


@dataclass(frozen=True)
class ModelCounts:
    total: int
    non_embedding: int
    embedding: int
    active: int
    active_non_embedding: int
    flops_per_token: float

    def to_dict(self) -> dict:
        return asdict(self)


def attention_params(cfg: ModelConfig) -> int:
    d, hd = cfg.d_model, cfg.head_dim
    return d * d + 2 * d * cfg.kv_heads * hd + d * d


def dense_ffn_params(cfg: ModelConfig) -> int:
    return 3 * cfg.d_model * cfg.ffn_dim


def attention_flops_per_token(cfg: ModelConfig) -> float:
    return 12.0 * cfg.n_layers * cfg.d_model * cfg.seq_len


def model_counts(cfg: ModelConfig, vocab_size: int | None = None) -> ModelCounts:
    """Counts for a model config; `vocab_size` overrides a config whose vocab is unresolved."""
    vocab = vocab_size or cfg.vocab_size
    if vocab is None:
        raise ValueError("model.vocab_size is not resolved: pass vocab_size or prepare the data first")
    d = cfg.d_model
    norms = 2 * d * cfg.n_layers + d
    ffn_total, ffn_active = _ffn_counts(cfg)
    body_total = cfg.n_layers * attention_params(cfg) + ffn_total + norms
    body_active = cfg.n_layers * attention_params(cfg) + ffn_active + norms
    emb = vocab * d
    head = 0 if cfg.tie_embeddings else vocab * d
    total = body_total + emb + head
    active = body_active + emb + head
    flops = 6.0 * (body_active - norms + vocab * d) + attention_flops_per_token(cfg)
    return ModelCounts(
        total=total,
        non_embedding=body_total,
        embedding=emb + head,
        active=active,
        active_non_embedding=body_active,
        flops_per_token=flops,
    )


def _ffn_counts(cfg: ModelConfig) -> tuple[int, int]:
    """(total, active) FFN parameters over all layers; MoE layers are counted by models.moe."""
    moe = getattr(cfg, "moe", None)
    if moe is None:
        p = cfg.n_layers * dense_ffn_params(cfg)
        return p, p
    return moe_ffn_counts(cfg)


def moe_layer_counts(cfg: ModelConfig) -> tuple[int, int]:
    """(total, active) parameters of one MoE FFN layer."""
    moe = cfg.moe
    assert moe is not None, "an MoE model's counts need its moe section"
    d, f = cfg.d_model, moe.d_ff or cfg.ffn_dim
    expert = 3 * d * f
    router = d * moe.num_experts
    shared = moe.num_shared_experts * expert
    k: float = moe.top_k
    if moe.router == "expert_choice":
        k = k * (moe.capacity_factor or 1.0)
    return moe.num_experts * expert + shared + router, int(round(k * expert)) + shared + router


def moe_ffn_counts(cfg: ModelConfig) -> tuple[int, int]:
    """(total, active) FFN parameters over all layers, MoE and dense."""
    total = active = 0
    moe_total, moe_active = moe_layer_counts(cfg)
    assert cfg.moe is not None  # moe_layer_counts checked it
    for i in range(cfg.n_layers):
        if cfg.moe.is_moe_layer(i):
            total, active = total + moe_total, active + moe_active
        else:
            total, active = total + dense_ffn_params(cfg), active + dense_ffn_params(cfg)
    return total, active
