"""Parameter and FLOP accounting, computed from the config alone (no torch needed).

Conventions (stated once, used by the logger, sweeps and fits):
- `total`: every trainable parameter.
- `non_embedding`: total minus the token embedding and the output projection (Kaplan's N).
- `active`: parameters touched per token (differs from total only for MoE).
- `flops_per_token`: training FLOPs per token = 6 * (active matmul parameters, output projection
  included) + 12 * n_layers * d_model * seq_len for attention scores and values (PaLM/nanoGPT
  convention: the causal mask is not subtracted). Forward only is one third of that.

Two model-config keys price architectures the trainer does not build (`model.mla`, `model.mtp_depth`):
- `mla`: multi-head latent attention (DeepSeek-V2/V3, arXiv:2405.04434 Sec. 2.1; models/mla_config.py):
  queries through a q_lora_rank bottleneck (or one d x heads x qk projection without it), keys and values
  from one kv_lora_rank latent plus a shared qk_rope_head_dim key, heads of qk_nope + qk_rope dims for
  scores and v_head_dim for values, an output projection from heads x v_head_dim; its attention FLOPs are
  6 x seq x heads x (qk_nope + qk_rope + v_head_dim) per layer and token (the same convention).
- `mtp_depth`: multi-token prediction (DeepSeek-V3, arXiv:2412.19437 Sec. 2.2): each of D modules adds a
  block like the last one, a 2d x d projection and two RMSNorms, sharing the embedding and output head,
  and its FLOPs per token are that block's, the projection's and one more pass through the head.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from models.config import ModelConfig
from models.mla_config import MLAConfig


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


def mla_params(mla: MLAConfig, d: int, heads: int) -> int:
    """One latent-attention layer: q down, norm and up (or one projection), kv down (with the rope key),
    norm and up, output."""
    qk = mla.qk_head_dim
    if mla.q_lora_rank:
        q = d * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * heads * qk
    else:
        q = d * heads * qk
    kv = d * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
    kv += mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim)
    return q + kv + heads * mla.v_head_dim * d


def attention_params(cfg: ModelConfig) -> int:
    """One layer's attention parameters (latent attention's when `model.mla` is set)."""
    if cfg.mla is not None:
        return mla_params(cfg.mla, cfg.d_model, cfg.n_heads)
    d, hd = cfg.d_model, cfg.head_dim
    return d * d + 2 * d * cfg.kv_heads * hd + d * d


def dense_ffn_params(cfg: ModelConfig) -> int:
    return 3 * cfg.d_model * cfg.ffn_dim


def attention_layer_flops_per_token(cfg: ModelConfig) -> float:
    """One layer's attention-core training FLOPs per token (scores and values, the causal mask not subtracted)."""
    if cfg.mla is not None:
        return 6.0 * cfg.seq_len * cfg.n_heads * (cfg.mla.qk_head_dim + cfg.mla.v_head_dim)
    return 12.0 * cfg.d_model * cfg.seq_len


def attention_flops_per_token(cfg: ModelConfig) -> float:
    return cfg.n_layers * attention_layer_flops_per_token(cfg)


def model_counts(cfg: ModelConfig, vocab_size: int | None = None) -> ModelCounts:
    """Counts for a model config (`model.mla` and `model.mtp_depth` included: module docstring);
    `vocab_size` overrides a config whose vocab is unresolved."""
    vocab = vocab_size or cfg.vocab_size
    if vocab is None:
        raise ValueError("model.vocab_size is not resolved: pass vocab_size or prepare the data first")
    d, L, D = cfg.d_model, cfg.n_layers, cfg.mtp_depth
    attn = attention_params(cfg)
    norms = 2 * d * L + d
    ffn_total, ffn_active = _ffn_counts(cfg)
    body_total = L * attn + ffn_total + norms
    body_active = L * attn + ffn_active + norms
    if D:  # each MTP module: a block like the last one, its 2d x d projection, its two norms + the block's two
        if cfg.moe is not None and cfg.moe.is_moe_layer(L - 1):
            last_total, last_active = moe_layer_counts(cfg)
        else:
            last_total = last_active = dense_ffn_params(cfg)
        body_total += D * (attn + last_total + 2 * d * d + 3 * d)
        body_active += D * (attn + last_active + 2 * d * d + 3 * d)
    emb = vocab * d
    head = 0 if cfg.tie_embeddings else vocab * d
    matmul_active = body_active - norms - D * 3 * d
    flops = 6.0 * (matmul_active + (1 + D) * vocab * d) + (L + D) * attention_layer_flops_per_token(cfg)
    return ModelCounts(
        total=body_total + emb + head,
        non_embedding=body_total,
        embedding=emb + head,
        active=body_active + emb + head,
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
    moe_total, moe_active = moe_layer_counts(cfg)
    assert cfg.moe is not None  # moe_layer_counts checked it
    n_moe = cfg.moe.n_moe_layers(cfg.n_layers)
    dense = (cfg.n_layers - n_moe) * dense_ffn_params(cfg)
    return n_moe * moe_total + dense, n_moe * moe_active + dense
