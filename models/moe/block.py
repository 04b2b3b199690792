"""The MoE feed-forward block that replaces a dense SwiGLU in selected layers.

forward(x) -> (y, MoEAux), the FFN contract every block FFN follows (SwiGLU returns (y, None)):
`aux.loss` is the already-weighted router loss (GPT sums it into `out.aux_loss`), `aux.stats`
the per-layer router statistics as detached tensors with their counts (summed over micro-batches
and ranks, converted to floats only when the trainer logs: `models.moe.metrics`).

The forward reads in stages, like Megatron's MoELayer: route -> capacity -> dispatch -> experts
-> combine -> shared experts. The dispatcher is an object (`LocalDispatcher`, or an
`AllToAllDispatcher` swapped in by expert parallelism); the block never sees a process group.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.config import ModelConfig
from models.layers import SwiGLU
from models.moe.config import MoEConfig
from models.moe.dispatch import LocalDispatcher
from models.moe.experts import GroupedExperts
from models.moe.routers import build_router
from models.moe.routers.base import capacity


@dataclass
class MoEAux:
    loss: torch.Tensor
    stats: dict


def expert_d_ff(cfg: ModelConfig) -> int:
    if cfg.moe is None:
        raise ValueError("expert_d_ff: the model config has no moe section")
    return cfg.moe.d_ff or cfg.ffn_dim


class MoEFeedForward(nn.Module):
    def __init__(self, d_model: int, moe: MoEConfig, d_ff: int):
        super().__init__()
        self.moe_cfg = moe
        self.num_experts = moe.num_experts
        self.router = build_router(moe, d_model)
        self.experts = GroupedExperts(moe.num_experts, d_model, d_ff, moe.grouped_mm)
        # Named without "expert" on purpose: DeepSpeed's MoE checkpointing treats every key
        # containing "expert" as a routed-expert weight.
        self.shared_mlp = SwiGLU(d_model, d_ff * moe.num_shared_experts) if moe.num_shared_experts else None
        # All experts local; pretrain.engine.expert_parallel swaps in an AllToAllDispatcher.
        self.dispatcher = LocalDispatcher(moe.num_experts)
        self.routes_by_token = moe.router == "token_hash"  # models.gpt.Block passes the token ids
        self.record_routing = False  # keep the last forward's assignments (models.moe.stability)
        self.last_routing: tuple[torch.Tensor, torch.Tensor, int] | None = None

    def forward(self, x: torch.Tensor, token_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, MoEAux]:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        ids = token_ids.reshape(-1) if token_ids is not None else None
        routing = self.router.route(flat, seq_len=shape[-2] if x.dim() == 3 else flat.shape[0], token_ids=ids)
        routing = self.limit_capacity(routing)
        if self.record_routing:
            self.last_routing = (routing.token_idx.detach(), routing.expert_idx.detach(), flat.shape[0])
        rows, counts, ctx = self.dispatcher.dispatch(flat, routing)
        y = self.dispatcher.combine(self.experts(rows, counts), ctx)
        if self.shared_mlp is not None:
            shared, _ = self.shared_mlp(flat)
            y = y + shared
        return y.view(shape), MoEAux(loss=routing.loss, stats=self._stats(routing))

    def limit_capacity(self, routing):
        """Drop token-choice assignments beyond the expert capacity (training only).

        Capacity is a training-time limit: dropping depends on the other tokens of the batch, so
        evaluation and generation route dropless (as Switch/ST-MoE raise eval capacity). Routers
        that enforce capacity themselves (expert_choice) give no priority and pass unchanged."""
        cf = self.moe_cfg.capacity_factor
        if cf is None or routing.priority is None or not self.training:
            return routing
        cap = capacity(cf, routing.num_tokens, self.moe_cfg.top_k, self.num_experts)
        return routing.limit_capacity(cap, self.num_experts)

    def _stats(self, r) -> dict:
        probs = r.probs.detach()
        entropy = -(probs * probs.clamp_min(1e-20).log()).sum(-1).mean()
        dropped = torch.as_tensor(r.dropped, dtype=torch.float32) / max(1, r.dropped_of)
        t = probs.shape[0]
        per_token = torch.bincount(r.token_idx, minlength=t)  # experts each token ran (after capacity)
        return {
            "router": self.moe_cfg.router,
            "load": r.requested.detach().float(),
            "dropped_frac": dropped,
            "dropped": r.dropped,  # counts, so that a step's micro-batches and ranks sum exactly
            "dropped_of": r.dropped_of,
            "tokens": t,
            "routed": r.token_idx.numel(),  # assignments the experts ran: realised active experts x tokens
            "k_hist": torch.bincount(per_token, minlength=self.num_experts + 1)[: self.num_experts + 1].float(),
            "entropy": entropy,
            **r.stats,
        }


def build_moe_ffn(cfg: ModelConfig, layer_idx: int) -> MoEFeedForward | None:
    """The MoE FFN for `layer_idx`, or None where the layer stays dense."""
    moe = cfg.moe
    if moe is None or not moe.is_moe_layer(layer_idx):
        return None
    return MoEFeedForward(cfg.d_model, moe, expert_d_ff(cfg))
