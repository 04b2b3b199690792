"""Token-choice top-k over softmax probabilities (Switch/GShard/Mixtral).

Loss: aux_loss_coef * Switch balance loss (equals the coefficient at perfect balance)
+ z_loss_coef * ST-MoE z-loss. Weights are the top-k probabilities, renormalised to sum to 1
when `renormalize` is true (Mixtral); off by default (Switch/GShard).

`aux_loss_scope` sets the tokens over which the balance loss counts expert loads f_i (Qiu et al.
2025, "Demons in the Detail", arXiv 2501.11873): `micro_batch` (default), `sequence` (f_i and
P_i per sequence, averaged) or `global_batch`: f_i from the loads counted over this optimizer
step's micro-batches so far (this one included) and summed over data-parallel ranks, P_i from this
micro-batch. The sum over ranks is a callable the trainer installs (`count_reducer`, an
all-reduce; models/ holds no process group); without one the scope spans gradient accumulation
only. As in the paper's implementation (and Megatron's `global_aux_loss`), micro-batch m sees
the loads of micro-batches 1..m: the whole step's loads at the last one. Evaluation forms the
loss per micro-batch (nothing is counted, no collective).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from models.checkpointing import recomputing
from models.moe.routers.base import (
    Router,
    Routing,
    router_z_loss,
    sequence_switch_loss,
    switch_balance_loss,
    topk_assignments,
)


class SoftmaxTopKRouter(Router):
    count_reducer: Callable[[torch.Tensor], torch.Tensor] | None
    global_load: torch.Tensor  # a buffer (register_buffer), declared for the type checker

    def __init__(self, cfg, d_model):
        super().__init__(cfg, d_model)
        self.count_reducer = None  # global_batch: sums a count vector over data-parallel ranks (set by the trainer)
        # global_batch: this step's loads so far, summed over ranks; reset after each optimizer step.
        self.register_buffer("global_load", torch.zeros(cfg.num_experts, dtype=torch.float32), persistent=False)

    def assign(self, logits: torch.Tensor, seq_len: int) -> Routing:
        cfg = self.cfg
        probs = logits.softmax(-1)
        renorm = bool(cfg.renormalize)
        token_idx, expert_idx, weight, top_idx = topk_assignments(probs, probs, self.top_k, renorm)
        requested = torch.bincount(expert_idx, minlength=self.num_experts)
        balance = self.balance_loss(probs, top_idx, requested, seq_len)
        z = router_z_loss(logits)
        return Routing(
            token_idx=token_idx,
            expert_idx=expert_idx,
            weight=weight,
            probs=probs,
            priority=probs.gather(1, top_idx).reshape(-1),
            loss=cfg.aux_loss_coef * balance + cfg.z_loss_coef * z,
            stats={"aux_loss": balance.detach(), "z_loss": z.detach()},
            requested=requested,
            num_tokens=logits.shape[0],
            dropped_of=expert_idx.numel(),
        )

    def balance_loss(self, probs, top_idx, requested, seq_len) -> torch.Tensor:
        scope = self.cfg.aux_loss_scope
        if scope == "sequence":
            return sequence_switch_loss(probs, top_idx, self.num_experts, seq_len)
        if scope == "global_batch" and self.training and torch.is_grad_enabled():
            if not recomputing():  # a checkpointed block's rerun in backward sees the loads its forward saw
                counts = requested.to(self.global_load.dtype)
                if self.count_reducer is not None:
                    counts = self.count_reducer(counts)
                self.global_load += counts
            f = self.global_load / self.global_load.sum().clamp_min(1.0)
            return self.num_experts * (f * probs.mean(0)).sum()
        return switch_balance_loss(probs, top_idx, self.num_experts)

    def step_counts(self) -> torch.Tensor | None:
        return None  # the loads were summed over ranks as they were counted

    def end_step(self, counts: torch.Tensor | None) -> None:
        self.global_load.zero_()
