"""Sinkhorn-balanced token choice (S-BASE, Clark et al. 2022; Megatron-Core's `sinkhorn`).

Selection uses the router logits rebalanced by a few Sinkhorn iterations so that, over the
micro-batch, every expert receives about the same share of tokens; the gate weights are the
plain softmax probabilities of the selected experts. It balances without an auxiliary loss and,
unlike aux_free_bias, within the current batch rather than with a lag. Like expert_choice the
balanced selection depends on the whole batch, so eval mode uses plain top-k (no warning: the
gate weights and the expert set are the same family; only the balancing is dropped).
"""

from __future__ import annotations

import math

import torch

from models.moe.routers.base import Router, Routing, router_z_loss, topk_assignments


@torch.no_grad()
def sinkhorn(logits: torch.Tensor, iters: int) -> torch.Tensor:
    """Rescale exp(logits) towards rows summing to 1/T and columns summing to 1/E (log domain)."""
    log_p = logits.float() - logits.float().logsumexp(-1, keepdim=True)
    t, e = log_p.shape
    for _ in range(iters):  # iterations over the whole matrix, not over tokens
        log_p = log_p - log_p.logsumexp(0, keepdim=True) - math.log(e)
        log_p = log_p - log_p.logsumexp(1, keepdim=True) - math.log(t)
    return log_p


class SinkhornRouter(Router):
    def assign(self, logits: torch.Tensor, seq_len: int) -> Routing:
        cfg = self.cfg
        probs = logits.softmax(-1)
        select = sinkhorn(logits, cfg.sinkhorn_iters) if self.training else probs.detach()
        renorm = bool(cfg.renormalize)
        token_idx, expert_idx, weight, top_idx = topk_assignments(select, probs, self.top_k, renorm)
        z = router_z_loss(logits)
        return Routing(
            token_idx=token_idx,
            expert_idx=expert_idx,
            weight=weight,
            probs=probs,
            priority=probs.gather(1, top_idx).reshape(-1).detach(),
            loss=cfg.z_loss_coef * z,
            stats={"z_loss": z.detach()},
            requested=torch.bincount(expert_idx, minlength=self.num_experts),
            num_tokens=logits.shape[0],
            dropped_of=expert_idx.numel(),
        )
