"""Token-choice top-k over softmax probabilities (Switch/GShard/Mixtral).

Loss: aux_loss_coef * Switch balance loss (equals the coefficient at perfect balance)
+ z_loss_coef * ST-MoE z-loss. Weights are the top-k probabilities, renormalised to sum to 1
when `renormalize` is true (Mixtral); off by default (Switch/GShard).
"""

from __future__ import annotations

import torch

from models.moe.routers.base import Router, Routing, router_z_loss, switch_balance_loss, topk_assignments


class SoftmaxTopKRouter(Router):
    def assign(self, logits: torch.Tensor, seq_len: int) -> Routing:
        cfg = self.cfg
        probs = logits.softmax(-1)
        renorm = bool(cfg.renormalize)
        token_idx, expert_idx, weight, top_idx = topk_assignments(probs, probs, self.top_k, renorm)
        balance = switch_balance_loss(probs, top_idx, self.num_experts)
        z = router_z_loss(logits)
        return Routing(
            token_idx=token_idx,
            expert_idx=expert_idx,
            weight=weight,
            probs=probs,
            priority=probs.gather(1, top_idx).reshape(-1),
            loss=cfg.aux_loss_coef * balance + cfg.z_loss_coef * z,
            stats={"aux_loss": balance.detach(), "z_loss": z.detach()},
            requested=torch.bincount(expert_idx, minlength=self.num_experts),
            num_tokens=logits.shape[0],
            dropped_of=expert_idx.numel(),
        )
