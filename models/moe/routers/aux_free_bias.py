"""Auxiliary-loss-free load balancing (DeepSeek-V3, Wang et al. 2024).

Affinities s = sigmoid(logits) (or softmax). Experts are *selected* by top-k of s + b, where b
is a per-expert bias that never touches the gate weights (weights are s of the selected experts,
renormalised by default for sigmoid). The router counts its assignments in `step_load` during
training forwards; after each optimizer step `models.moe.balance.update_router_controllers` applies
b += rate * sign(mean_load - load) to every such layer at once (one all-reduce for all layers).
An optional sequence-level balance loss (DeepSeek-V3 eq. 17-20) can be added.
"""

from __future__ import annotations

import torch

from models.checkpointing import recomputing
from models.moe.config import MoEConfig
from models.moe.routers.base import Router, Routing, router_z_loss, topk_assignments


def sequence_balance_loss(scores: torch.Tensor, top_idx: torch.Tensor, num_experts: int, seq_len: int) -> torch.Tensor:
    """DeepSeek-V3 complementary sequence-wise loss: mean over sequences of sum_i f_i * P_i.

    f_i = E / (k T) * (#tokens of the sequence choosing i), P_i = mean over the sequence of the
    normalised affinity s_i / sum_j s_j. Perfect balance gives 1.
    """
    t, k = top_idx.shape
    n_seq = t // seq_len
    norm = scores / scores.sum(-1, keepdim=True).clamp_min(1e-20)
    p = norm.view(n_seq, seq_len, num_experts).mean(1)  # (S, E)
    onehot = torch.zeros(n_seq, seq_len * k, num_experts, device=scores.device, dtype=scores.dtype)
    onehot.scatter_(2, top_idx.view(n_seq, seq_len * k, 1), 1.0)
    f = onehot.sum(1) * num_experts / (k * seq_len)  # (S, E)
    return (f * p).sum(-1).mean()


class AuxFreeBiasRouter(Router):
    score_bias: torch.Tensor  # buffers (register_buffer), declared for their type
    step_load: torch.Tensor

    def __init__(self, cfg: MoEConfig, d_model: int):
        super().__init__(cfg, d_model)
        # Persistent: part of checkpoints so that a resumed run selects experts exactly as before.
        self.register_buffer("score_bias", torch.zeros(cfg.num_experts, dtype=torch.float32))
        # Assignments counted since the last optimizer step (all micro-batches); reset after each update.
        self.register_buffer("step_load", torch.zeros(cfg.num_experts, dtype=torch.float32), persistent=False)

    def assign(self, logits: torch.Tensor, seq_len: int) -> Routing:
        cfg = self.cfg
        scores = logits.sigmoid() if cfg.score_func == "sigmoid" else logits.softmax(-1)
        renorm = cfg.renormalize if cfg.renormalize is not None else cfg.score_func == "sigmoid"
        select = scores.detach() + self.score_bias
        token_idx, expert_idx, weight, top_idx = topk_assignments(select, scores, self.top_k, renorm)
        requested = torch.bincount(expert_idx, minlength=self.num_experts)
        if self.training and not recomputing():  # a checkpointed block's rerun in backward counts nothing
            self.step_load += requested.to(self.step_load.dtype)
        z = router_z_loss(logits)
        loss = cfg.z_loss_coef * z
        raw = {"z_loss": z.detach()}
        seq = sequence_balance_loss(scores, top_idx, self.num_experts, seq_len)
        raw["aux_loss"] = seq.detach()
        if cfg.seq_aux_loss_coef > 0:
            loss = loss + cfg.seq_aux_loss_coef * seq
        probs = scores / scores.sum(-1, keepdim=True)
        return Routing(
            token_idx=token_idx,
            expert_idx=expert_idx,
            weight=weight,
            probs=probs,
            priority=scores.gather(1, top_idx).reshape(-1).detach(),
            loss=loss,
            stats=raw | {"bias_norm": self.score_bias.norm().detach()},
            requested=requested,
            num_tokens=logits.shape[0],
            dropped_of=expert_idx.numel(),
        )

    def step_counts(self) -> torch.Tensor:
        return self.step_load

    def end_step(self, counts: torch.Tensor | None) -> None:
        if counts is not None:  # balance.py passes the step's counts summed over ranks (step_counts gives one)
            sign_update(self.score_bias, counts.to(self.step_load.dtype), self.cfg.bias_update_rate)
        self.step_load.zero_()


def sign_update(bias: torch.Tensor, load: torch.Tensor, rate: float) -> None:
    """b += rate * sign(mean_load - load), in place: overloaded experts become less attractive.
    A layer that counted nothing (no training forward since the last update) keeps its bias."""
    if load.sum() > 0:
        bias += rate * torch.sign(load.mean() - load)
