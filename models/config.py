"""Typed model configuration (dense GPT; MoE fields live in `models.moe.config`, multi-head latent attention's
in `models.mla_config`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from base.roles import BOOKKEEPING, SweepAxis
from base.strict import StrictModel
from models.mla_config import MLAConfig
from models.moe.config import MoEConfig

PRICED_ONLY = "the trainer does not build it; `scalelab plan --model` prices it"


class ModelConfig(StrictModel):
    """Decoder-only transformer (Llama layout: RMSNorm, RoPE, SwiGLU, optional GQA)."""

    preset: Annotated[str | None, BOOKKEEPING] = Field(
        None, description="name of the configs/models/ preset this came from"
    )
    d_model: Annotated[int, SweepAxis("d_model")] = Field(gt=0, description="hidden size")
    n_layers: Annotated[int, SweepAxis("L")] = Field(gt=0, description="number of transformer blocks")
    n_heads: int = Field(gt=0, description="attention heads; must divide d_model")
    n_kv_heads: int | None = Field(
        None, gt=0, description="key/value heads for GQA; must divide n_heads (default n_heads)"
    )
    d_ff: int | None = Field(
        None, gt=0, description="SwiGLU hidden size (default 8/3*d_model rounded up to a multiple of 32)"
    )
    vocab_size: Annotated[int | None, BOOKKEEPING] = Field(
        None, gt=0, description="vocabulary size (default: the prepared data's tokenizer)"
    )
    seq_len: Annotated[int, SweepAxis("T")] = Field(256, gt=0, description="context length in tokens")
    tie_embeddings: bool = Field(False, description="share input embedding and output projection")
    rope_theta: float = Field(10000.0, gt=0, description="RoPE base frequency")
    norm_eps: float = Field(1e-5, gt=0, description="RMSNorm epsilon")
    init_std: float = Field(
        0.02, gt=0, description="std of the normal init; output projections are scaled by 1/sqrt(2*n_layers)"
    )
    moe: MoEConfig | None = Field(
        None, description="mixture-of-experts FFNs (see models/moe/config.py); null: dense model"
    )
    mla: MLAConfig | None = Field(
        None,
        description="multi-head latent attention (DeepSeek-V2/V3) instead of multi-head/GQA attention: "
        f"{PRICED_ONLY} (parameters, FLOPs, memory, step time); null: the Llama attention the trainer builds",
    )
    mtp_depth: int = Field(
        0,
        ge=0,
        description="multi-token prediction modules (DeepSeek-V3's MTP depth D; its num_nextn_predict_layers): "
        f"each a block like the last one, a 2d x d projection and one more pass through the shared output head; "
        f"{PRICED_ONLY}; 0: none",
    )
    parametrization: Literal["sp", "mup"] = Field(
        "sp",
        description="sp: standard parametrization; mup: maximal-update parametrization (Yang et al. 2022), whose "
        "optimal lr and init do not move with width: hidden-matrix init std and AdamW lr scaled by "
        "mup_base_width/d_model, output logits by the same ratio, attention scores by 1/head_dim (docs/mup.md)",
    )
    mup_base_width: int | None = Field(
        None,
        gt=0,
        description="mup: the d_model at which mup equals sp (where the lr and init_std were tuned); required "
        "with parametrization mup, ignored with sp",
    )
    mup_base_head_dim: int | None = Field(
        None,
        gt=0,
        description="mup: the head dim at which the 1/head_dim attention scale equals sp's 1/sqrt(head_dim) "
        "(default mup_base_width / n_heads); ignored with sp",
    )

    @model_validator(mode="after")
    def _check_shapes(self) -> ModelConfig:
        if self.d_model % self.n_heads:
            raise ValueError(f"model.n_heads={self.n_heads} must divide model.d_model={self.d_model}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError(f"model.d_model/model.n_heads={self.d_model // self.n_heads} must be even for RoPE")
        kv = self.n_kv_heads or self.n_heads
        if self.n_heads % kv:
            raise ValueError(f"model.n_kv_heads={kv} must divide model.n_heads={self.n_heads}")
        if self.mla is not None and self.n_kv_heads not in (None, self.n_heads):
            raise ValueError(
                f"model.n_kv_heads={self.n_kv_heads} with model.mla: latent attention has no key/value heads to "
                "group (its keys and values come from one latent per token); leave model.n_kv_heads unset"
            )
        if self.parametrization == "mup" and self.mup_base_width is None:
            raise ValueError(
                "model.parametrization mup needs model.mup_base_width (the width whose lr and init_std are given)"
            )
        return self

    def priced_only(self) -> list[str]:
        """The keys set to an architecture the trainer does not build (the planner prices them)."""
        return [k for k, on in (("model.mla", self.mla is not None), ("model.mtp_depth", self.mtp_depth > 0)) if on]

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def ffn_dim(self) -> int:
        if self.d_ff is not None:
            return self.d_ff
        return ((8 * self.d_model // 3 + 31) // 32) * 32
