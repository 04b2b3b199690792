"""Sigmoid scores with a per-expert threshold held by a load controller (scalelab's own router).

A token runs expert e when its margin c_e - tau_e is positive, where c_e = logit_e - mean_j logit_j
is the logit centred over the token's experts and tau_e the expert's threshold; it always runs the
`threshold_min_experts` experts of highest margin (margins, not scores: the thresholds then steer
the forced picks too, so no expert's forced load can exceed its budget). Each is weighted by its
sigmoid score s_e = sigmoid(logit_e) (renormalised only if `renormalize` is set). So the number
of experts per token varies: a token whose scores stand out for several experts runs several, an
unremarkable one runs few. Centring is per token (causal, batch-independent) and removes the
drift common to all experts: in the exploration (docs/moe.md) every expert's mean logit fell by
~0.15 per step early in training (the language-model loss first turns the untrained experts
down), 1-2 logit sd per step, which thresholds on raw logits could not follow (k stayed at 1.0
for 40-50 steps at every controller rate tried).

The controller is a stochastic quantile tracker (Robbins-Monro) in units of each expert's spread:
after each optimizer step, tau_e += rate * sd_e * (share_e / (top_k / E) - 1), share_e the
fraction of the step's tokens (all micro-batches, all data-parallel ranks) that ran expert e and
sd_e the standard deviation of its centred logits over those tokens (`threshold_update_rate` is
dimensionless). After the first step the thresholds are calibrated to the Gaussian
(1 - top_k / E) quantile of each expert's centred logits, mean_e + sd_e * ndtri(1 - top_k / E).
Its fixed point is share_e = top_k / E for every expert, so at equilibrium the load is balanced
exactly and the mean experts per token is top_k: the same active FLOPs as top-k routing, with no
auxiliary loss in the gradient and no bias that distorts the choice (the threshold sets how many
tokens an expert takes, never which expert a token prefers among those above threshold).
Thresholds are persistent buffers (resume is exact); evaluation uses them frozen, so each
token's routing depends on its own scores only (causal, batch-independent).

Claim (docs/moe.md, "Our router"): at equal realised training FLOPs it beats softmax_topk with a
tuned aux loss and aux_free_bias; the mechanism predicts that tokens with higher loss run more
experts (positive correlation between per-token k and per-token loss), which the study checks.
"""

from __future__ import annotations

import math

import torch

from models.checkpointing import recomputing
from models.moe.routers.base import Router, Routing, mask_assignments, router_z_loss


class SigmoidThresholdRouter(Router):
    threshold: torch.Tensor  # buffers (register_buffer), declared for the type checker
    calibrated: torch.Tensor
    step_load: torch.Tensor

    def __init__(self, cfg, d_model):
        super().__init__(cfg, d_model)
        self.register_buffer("threshold", torch.zeros(cfg.num_experts, dtype=torch.float32))
        self.register_buffer("calibrated", torch.zeros((), dtype=torch.bool))  # thresholds set from logit statistics
        # since the last optimizer step: per expert the tokens that ran it, the tokens, and per
        # expert the sum and the sum of squares of its centred logits
        e = cfg.num_experts
        self.register_buffer("step_load", torch.zeros(3 * e + 1, dtype=torch.float64), persistent=False)

    def assign(self, logits: torch.Tensor, seq_len: int) -> Routing:
        cfg = self.cfg
        scores = logits.sigmoid()
        centred = logits.detach() - logits.detach().mean(-1, keepdim=True)
        margin = centred - self.threshold
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
            e, lg = self.num_experts, centred.double()
            self.step_load[:e] += requested
            self.step_load[e] += logits.shape[0]
            self.step_load[e + 1 : 2 * e + 1] += lg.sum(0)
            self.step_load[2 * e + 1 :] += (lg * lg).sum(0)
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

    def end_step(self, counts: torch.Tensor | None) -> None:
        e = self.num_experts
        if counts is not None and counts[e] > 0:
            tokens = counts[e]
            share = counts[:e] / tokens
            mean = counts[e + 1 : 2 * e + 1] / tokens
            sd = (counts[2 * e + 1 :] / tokens - mean * mean).clamp_min(0).sqrt()
            target = self.top_k / e
            if not self.calibrated:
                z = torch.special.ndtri(torch.tensor(1 - target, dtype=torch.float64)) if target < 1 else -math.inf
                self.threshold.copy_((mean + sd * z).to(self.threshold.dtype))
                self.calibrated.fill_(True)
            else:
                step = self.cfg.threshold_update_rate * sd * (share / target - 1)
                self.threshold += step.to(self.threshold.dtype)
        self.step_load.zero_()
