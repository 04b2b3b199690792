"""Typed multi-head latent attention shape (`model.mla.*`), DeepSeek-V2/V3's names (arXiv:2405.04434 Sec. 2.1).

Priced only: models/accounting.py counts its parameters and FLOPs and the planner its memory and step time;
the trainer does not build it (`scalelab train` refuses a config that sets it). Errors name the key.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from base.strict import StrictModel


class MLAConfig(StrictModel):
    """Queries through a q_lora_rank latent, keys and values from one kv_lora_rank latent per token plus a
    shared RoPE key; DeepSeek-V3: q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128,
    qk_rope_head_dim 64, v_head_dim 128 (its config.json)."""

    kv_lora_rank: int = Field(gt=0, description="width of the compressed key/value latent per token (V3: 512)")
    q_lora_rank: int | None = Field(
        None,
        gt=0,
        description="width of the compressed query latent (V3: 1536); null: one d_model x heads "
        "x (qk_nope_head_dim + qk_rope_head_dim) query projection (V2-Lite)",
    )
    qk_nope_head_dim: int = Field(
        ge=0, description="per-head query/key dims without RoPE, up-projected from the kv latent (V3: 128)"
    )
    qk_rope_head_dim: int = Field(
        gt=0,
        description="per-head query/key dims carrying RoPE; the key's is one per token, shared by the heads "
        "(V3: 64; even)",
    )
    v_head_dim: int = Field(gt=0, description="per-head value dims (V3: 128); the output projection is heads x this")

    @model_validator(mode="after")
    def _check(self) -> MLAConfig:
        if self.qk_rope_head_dim % 2:
            raise ValueError(f"model.mla.qk_rope_head_dim={self.qk_rope_head_dim} must be even for RoPE")
        return self

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim
