"""Typed MoE configuration (`model.moe.*`). Validation errors name the key, e.g. `model.moe.top_k`."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, model_validator

from base.roles import SweepAxis
from base.strict import StrictModel

RouterName = Literal[
    "softmax_topk", "aux_free_bias", "expert_choice", "sinkhorn", "relu_l1", "token_hash", "sigmoid_threshold"
]
ROUTER_NAMES: tuple[str, ...] = get_args(RouterName)


class MoEConfig(StrictModel):
    """Which FFN layers become MoE layers and how tokens are routed to experts."""

    num_experts: Annotated[int, SweepAxis("e")] = Field(8, ge=1, description="routed experts per MoE layer")
    top_k: Annotated[int, SweepAxis("k")] = Field(
        2, ge=1, description="experts per token (token-choice routers); expert_choice: average experts per token"
    )
    d_ff: int | None = Field(
        None,
        gt=0,
        description="hidden size of each expert's SwiGLU (default: "
        "model.d_ff); smaller values give fine-grained experts",
    )
    num_shared_experts: int = Field(
        0,
        ge=0,
        description="always-active experts of size d_ff (DeepSeekMoE), "
        "run as one SwiGLU of width num_shared_experts*d_ff",
    )
    capacity_factor: float | None = Field(
        None,
        gt=0,
        description="expert capacity = ceil(capacity_factor * tokens * top_k "
        "/ num_experts) per micro-batch; the lowest-scoring "
        "assignments beyond it are dropped (the token keeps its residual); training only, eval/generation is dropless. "
        "null: dropless (expert_choice: its capacity, default 1.0)",
    )
    router: RouterName = Field("softmax_topk", description="routing rule: " + ", ".join(ROUTER_NAMES))
    every_k_layers: int = Field(
        1,
        ge=1,
        description="MoE in every k-th layer after the dense prefix: layer i is MoE iff "
        "i >= first_dense_layers and (i - first_dense_layers + 1) % k == 0",
    )
    first_dense_layers: int = Field(
        0, ge=0, description="number of leading layers that keep a dense FFN (DeepSeek-style)"
    )
    renormalize: bool | None = Field(
        None,
        description="renormalise the top-k weights to sum to 1 (default: "
        "off for softmax scores, on for sigmoid scores)",
    )
    aux_loss_coef: float = Field(
        0.01,
        ge=0,
        description="softmax_topk: Switch/GShard load-balancing loss "
        "coefficient; perfect balance gives exactly this value",
    )
    z_loss_coef: float = Field(
        0.001, ge=0, description="ST-MoE router z-loss coefficient: coef * mean(logsumexp(logits)^2) (all routers)"
    )
    score_func: Literal["sigmoid", "softmax"] = Field(
        "sigmoid", description="aux_free_bias: affinity function (DeepSeek-V3 uses sigmoid)"
    )
    bias_update_rate: float = Field(
        0.001, ge=0, description="aux_free_bias: bias += rate * sign(mean_load - load) after each optimizer step"
    )
    seq_aux_loss_coef: float = Field(
        0.0, ge=0, description="aux_free_bias: sequence-level balance loss coefficient (DeepSeek-V3 used 1e-4)"
    )
    aux_loss_scope: Literal["micro_batch", "sequence", "global_batch"] = Field(
        "micro_batch",
        description="softmax_topk: the tokens over which the balance loss counts expert loads: each micro-batch, "
        "each sequence, or the global batch (loads summed over the step's micro-batches so far and over "
        "data-parallel ranks before the loss is formed)",
    )
    l1_target_rate: float = Field(
        1.2,
        gt=1,
        description="relu_l1: after each optimizer step the L1 coefficient is multiplied by this when the mean "
        "active experts per token exceed top_k, divided by it when below (ReMoE's alpha)",
    )
    l1_coef_init: float = Field(1e-8, gt=0, description="relu_l1: initial L1 coefficient (ReMoE's lambda_0)")
    threshold_update_rate: float = Field(
        0.2,
        gt=0,
        description="sigmoid_threshold: after each optimizer step each expert's threshold on its token-centred logit "
        "moves by rate x the sd of those logits x (load share / (top_k / num_experts) - 1); after the first step "
        "the thresholds are calibrated to their Gaussian quantile",
    )
    threshold_min_experts: int = Field(
        1,
        ge=0,
        description="sigmoid_threshold: every token runs at least this many experts (its highest scores), "
        "above-threshold experts come on top; the controller counts them all",
    )
    sinkhorn_iters: int = Field(8, ge=1, description="sinkhorn: normalisation iterations for the balanced assignment")
    ep_size: int = Field(
        1,
        ge=1,
        description="expert-parallel ranks: experts are sharded over groups of "
        "ep_size ranks (must divide num_experts and the world size)",
    )
    grouped_mm: Literal["auto", "on", "off"] = Field(
        "auto",
        description="expert matmuls: auto uses torch.nn.functional.grouped_mm for bf16 on CUDA with compute "
        "capability >= 8.0, per-expert slices otherwise; on forces it wherever torch has it",
    )

    @model_validator(mode="after")
    def _check(self) -> MoEConfig:
        if self.top_k > self.num_experts:
            raise ValueError(f"model.moe.top_k={self.top_k} must be <= model.moe.num_experts={self.num_experts}")
        if self.router == "sigmoid_threshold" and self.threshold_min_experts > self.top_k:
            raise ValueError(
                f"model.moe.threshold_min_experts={self.threshold_min_experts} must be <= model.moe.top_k="
                f"{self.top_k} (the controller holds the mean at top_k)"
            )
        if self.aux_loss_scope != "micro_batch" and self.router != "softmax_topk":
            raise ValueError(
                f"model.moe.aux_loss_scope={self.aux_loss_scope} applies to router softmax_topk only "
                f"(router is {self.router}; aux_free_bias has seq_aux_loss_coef)"
            )
        if self.num_experts % self.ep_size:
            raise ValueError(f"model.moe.ep_size={self.ep_size} must divide model.moe.num_experts={self.num_experts}")
        return self

    def is_moe_layer(self, layer_idx: int) -> bool:
        i = layer_idx - self.first_dense_layers
        return i >= 0 and (i + 1) % self.every_k_layers == 0

    def moe_layers(self, n_layers: int) -> list[int]:
        return [i for i in range(n_layers) if self.is_moe_layer(i)]

    def n_moe_layers(self, n_layers: int) -> int:
        """len(moe_layers(n_layers)) without building the list (the layout search asks it per layout)."""
        return max(0, n_layers - self.first_dense_layers) // self.every_k_layers
