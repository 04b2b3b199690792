"""ReLU routing with an adaptive L1 penalty (ReMoE, Wang et al. 2024, arXiv 2412.14711).

Gates g = ReLU(logits): a token runs every expert whose gate is positive, weighted by the gate
(no softmax, no top-k: the number of experts per token varies and the gate is differentiable
where it is on). Sparsity comes from a load-balanced L1 penalty added to the loss,
l1_coef * mean over tokens of sum_e (E * f_e) g_e, f_e the expert's share of this micro-batch's
active assignments (detached): busier experts are pushed off harder. After each optimizer step
the controller multiplies `l1_coef` by `l1_target_rate` when the step's mean active experts per
token (summed over micro-batches and data-parallel ranks) exceed top_k and divides it when they
fall below (ReMoE's lambda_{i+1} = lambda_i * alpha^sign(...)), so the mean is held at top_k.
The coefficient is a persistent buffer: resume continues the controller exactly. Evaluation
routes each token by its own gates (causal, batch-independent); the coefficient is not updated.
"""

from __future__ import annotations

import torch

from models.checkpointing import recomputing
from models.moe.routers.base import Router, Routing, mask_assignments, router_z_loss


class ReluL1Router(Router):
    l1_coef: torch.Tensor  # buffers (register_buffer), declared for the type checker
    step_active: torch.Tensor

    def __init__(self, cfg, d_model):
        super().__init__(cfg, d_model)
        self.register_buffer("l1_coef", torch.tensor(cfg.l1_coef_init, dtype=torch.float64))
        # (active assignments, tokens) counted since the last optimizer step; reset after each update
        self.register_buffer("step_active", torch.zeros(2, dtype=torch.float64), persistent=False)

    def assign(self, logits: torch.Tensor, seq_len: int) -> Routing:
        cfg = self.cfg
        gates = torch.relu(logits)
        active = gates.detach() > 0
        token_idx, expert_idx, weight = mask_assignments(active, gates)
        requested = active.sum(0)
        if self.training and not recomputing():
            self.step_active[0] += requested.sum()
            self.step_active[1] += logits.shape[0]
        share = requested.float() / requested.sum().clamp_min(1)
        l1 = (gates * (self.num_experts * share)).sum(-1).mean()
        z = router_z_loss(logits)
        return Routing(
            token_idx=token_idx,
            expert_idx=expert_idx,
            weight=weight,
            probs=logits.detach().softmax(-1),
            priority=weight.detach(),
            loss=self.l1_coef.float() * l1 + cfg.z_loss_coef * z,
            stats={"z_loss": z.detach(), "l1_loss": l1.detach(), "l1_coef": self.l1_coef.detach().float()},
            requested=requested,
            num_tokens=logits.shape[0],
            dropped_of=expert_idx.numel(),
        )

    def step_counts(self) -> torch.Tensor:
        return self.step_active

    def end_step(self, counts: torch.Tensor | None) -> None:
        active, tokens = counts.double().tolist() if counts is not None else (0.0, 0.0)
        if tokens > 0:
            mean_k = active / tokens
            if mean_k > self.top_k:
                self.l1_coef *= self.cfg.l1_target_rate
            elif mean_k < self.top_k:
                self.l1_coef /= self.cfg.l1_target_rate
        self.step_active.zero_()
