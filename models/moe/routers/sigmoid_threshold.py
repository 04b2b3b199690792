"""Sigmoid scores with a per-expert threshold held by a load controller (scalelab's own router).

A token runs expert e when its margin logit_e - tau_e is positive, tau_e the expert's threshold,
and always the `threshold_min_experts` experts of highest margin (margins, not scores: the
thresholds then steer the forced picks too, so no expert's forced load can exceed its budget);
each is weighted by its sigmoid score s_e (renormalised only if `renormalize` is set). So the
number of experts per token varies: a token whose scores stand out for several experts runs
several, an unremarkable one runs few.

The controller is a stochastic quantile tracker (Robbins-Monro): after each optimizer step,
tau_e += rate * (share_e / (top_k / E) - 1), share_e the fraction of the step's tokens (all
micro-batches, all data-parallel ranks) that ran expert e. Its fixed point is share_e = top_k / E
for every expert, so at equilibrium the load is balanced exactly and the mean experts per token
is top_k: the same active FLOPs as top-k routing, with no auxiliary loss in the gradient and no
bias that distorts the choice (the threshold sets how many tokens an expert takes, never which
expert a token prefers among those above threshold). Thresholds are persistent buffers (resume
is exact); evaluation uses them frozen, so each token's routing depends on its own scores only
(causal, batch-independent).

Claim (docs/moe.md, "Our router"): at equal realised training FLOPs it beats softmax_topk with a
tuned aux loss and aux_free_bias; the mechanism predicts that tokens with higher loss run more
experts (positive correlation between per-token k and per-token loss), which the study checks.
"""

from __future__ import annotations

import torch

from models.checkpointing import recomputing
from models.moe.routers.base import Router, Routing, mask_assignments, router_z_loss


class SigmoidThresholdRouter(Router):
    def __init__(self, cfg, d_model):
        super().__init__(cfg, d_model)
        self.register_buffer("threshold", torch.zeros(cfg.num_experts, dtype=torch.float32))
        # per expert the tokens that ran it, then the tokens, since the last optimizer step
        self.register_buffer("step_load", torch.zeros(cfg.num_experts + 1, dtype=torch.float64), persistent=False)

    def assign(self, logits: torch.Tensor, seq_len: int) -> Routing:
        cfg = self.cfg
        scores = logits.sigmoid()
        margin = logits.detach() - self.threshold
        active = margin > 0
        if cfg.threshold_min_experts:
            top = margin.topk(cfg.threshold_min_experts, dim=-1).indices
            active = active.scatter(1, top, True)
        gate = scores
        if cfg.renormalize:
            gate = scores * active / (scores * active).sum(-1, keepdim=True).clamp_min(1e-20)
        token_idx, expert_idx, weight = mask_assignments(active, gate)
        requested = active.sum(0)
        if self.training and not recomputing():
            self.step_load[:-1] += requested
            self.step_load[-1] += logits.shape[0]
        z = router_z_loss(logits)
        return Routing(
            token_idx=token_idx,
            expert_idx=expert_idx,
            weight=weight,
            probs=scores.detach() / scores.detach().sum(-1, keepdim=True),
            priority=weight.detach(),
            loss=cfg.z_loss_coef * z,
            stats={"z_loss": z.detach(), "threshold_mean": self.threshold.mean().detach()},
            requested=requested,
            num_tokens=logits.shape[0],
            dropped_of=expert_idx.numel(),
        )

    def step_counts(self) -> torch.Tensor:
        return self.step_load

    def end_step(self, counts: torch.Tensor) -> None:
        tokens = counts[-1]
        if tokens > 0:
            share = counts[:-1] / tokens
            target = self.top_k / self.num_experts
            self.threshold += (self.cfg.threshold_update_rate * (share / target - 1)).to(self.threshold.dtype)
        self.step_load.zero_()
