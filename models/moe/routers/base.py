"""What every router returns, and the loss formulas routers share.

A router turns the (tokens, d_model) input into a flat list of *assignments*
(token, expert, weight). Token-choice routers make `top_k` assignments per token and give each
a priority used by capacity dropping; expert-choice routers pick tokens per expert and enforce
capacity themselves (`priority is None`). Losses are returned, never stored in globals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
from torch import nn

from models.moe.config import MoEConfig


@dataclass
class Routing:
    token_idx: torch.Tensor  # (A,) long: row of the flattened input
    expert_idx: torch.Tensor  # (A,) long: global expert id
    weight: torch.Tensor  # (A,) fp32 gate weight (differentiable)
    probs: torch.Tensor  # (T, E) normalised router distribution, for the entropy metric
    priority: torch.Tensor | None = None  # (A,) higher survives capacity dropping; None: no dropping
    loss: torch.Tensor | None = None  # weighted router losses to add to the training loss
    stats: dict[str, torch.Tensor] = field(default_factory=dict)  # unweighted loss values etc., for logging
    requested: torch.Tensor | None = None  # (E,) assignments asked for before dropping (load metric)
    num_tokens: int = 0
    dropped: int | torch.Tensor = 0  # dropped assignments (token-choice) or unrouted tokens (expert-choice)
    dropped_of: int = 0  # denominator of the dropped fraction

    def limit_capacity(self, capacity: int, num_experts: int) -> Routing:
        """Keep at most `capacity` assignments per expert, dropping the lowest-priority ones."""
        if self.priority is None:
            raise ValueError("a routing without priorities drops nothing (its router enforces capacity itself)")
        priority = self.priority
        keep = capacity_mask(self.expert_idx, priority, num_experts, capacity)
        return replace(
            self,
            token_idx=self.token_idx[keep],
            expert_idx=self.expert_idx[keep],
            weight=self.weight[keep],
            priority=priority[keep],
            dropped=(~keep).sum(),
        )


def capacity(capacity_factor: float, num_tokens: int, top_k: int, num_experts: int) -> int:
    """GShard/Switch expert capacity: ceil(cf * tokens * k / E), at least 1."""
    return max(1, math.ceil(capacity_factor * num_tokens * top_k / num_experts))


def capacity_mask(expert_idx: torch.Tensor, priority: torch.Tensor, num_experts: int, cap: int) -> torch.Tensor:
    """Boolean keep-mask: within each expert, the `cap` assignments of highest priority survive.

    Two stable sorts (priority descending, then expert) give each assignment its rank inside its
    expert without a Python loop; ties keep the earlier token.
    """
    n = expert_idx.numel()
    order = torch.argsort(priority.detach(), descending=True, stable=True)
    order = order[torch.argsort(expert_idx[order], stable=True)]
    counts = torch.bincount(expert_idx, minlength=num_experts)
    starts = torch.cumsum(counts, 0) - counts
    rank_in_expert = torch.arange(n, device=expert_idx.device) - starts[expert_idx[order]]
    keep = torch.empty(n, dtype=torch.bool, device=expert_idx.device)
    keep[order] = rank_in_expert < cap
    return keep


def topk_assignments(select: torch.Tensor, gate: torch.Tensor, k: int, renormalize: bool):
    """Token-choice: each token picks its k highest `select` scores; weights come from `gate`."""
    t = select.shape[0]
    top_idx = select.topk(k, dim=-1).indices  # (T, k)
    w = gate.gather(1, top_idx)
    if renormalize:
        w = w / w.sum(-1, keepdim=True).clamp_min(1e-20)
    token_idx = torch.arange(t, device=select.device).repeat_interleave(k)
    return token_idx, top_idx.reshape(-1), w.reshape(-1), top_idx


def switch_balance_loss(probs: torch.Tensor, top_idx: torch.Tensor, num_experts: int) -> torch.Tensor:
    """Switch/GShard load balancing: E * sum_i f_i * P_i.

    f_i: fraction of the T*k assignments that chose expert i (before dropping); P_i: mean router
    probability of expert i. Perfect balance (f_i = P_i = 1/E) gives exactly 1, so the weighted
    loss equals its coefficient.
    """
    counts = torch.bincount(top_idx.reshape(-1), minlength=num_experts).to(probs.dtype)
    f = counts / top_idx.numel()
    p = probs.mean(0)
    return num_experts * (f * p).sum()


def sequence_switch_loss(probs: torch.Tensor, top_idx: torch.Tensor, num_experts: int, seq_len: int) -> torch.Tensor:
    """The Switch balance loss formed per sequence and averaged over sequences (1 at balance)."""
    t, k = top_idx.shape
    n_seq = t // seq_len
    p = probs.view(n_seq, seq_len, num_experts).mean(1)  # (S, E)
    onehot = torch.zeros(n_seq, seq_len * k, num_experts, device=probs.device, dtype=probs.dtype)
    onehot.scatter_(2, top_idx.reshape(n_seq, seq_len * k, 1), 1.0)
    f = onehot.sum(1) / (k * seq_len)  # (S, E)
    return num_experts * (f * p).sum(-1).mean()


def mask_assignments(active: torch.Tensor, gate: torch.Tensor):
    """Variable-k routing: every (token, expert) where `active` (T, E) is true, token-major; weights from `gate`."""
    token_idx, expert_idx = active.nonzero(as_tuple=True)
    return token_idx, expert_idx, gate[token_idx, expert_idx]


def router_z_loss(logits: torch.Tensor) -> torch.Tensor:
    """ST-MoE z-loss: mean over tokens of logsumexp(logits)^2 (keeps router logits small)."""
    return torch.logsumexp(logits, dim=-1).pow(2).mean()


class Router(nn.Module):
    """Linear router (no bias) computing fp32 logits; subclasses decide the assignment.

    `forward(x)` returns only the logits, the one place the weight is used: ZeRO-3 gathers a
    module's parameters around its call and re-gathers them for backward through hooks on the
    tensors the call returns, which it cannot find inside a `Routing`. Callers use
    `route(x, seq_len)`; subclasses implement `assign(logits, seq_len)`.
    """

    token_choice = True

    def __init__(self, cfg: MoEConfig, d_model: int):
        super().__init__()
        self.cfg = cfg
        self.num_experts, self.top_k = cfg.num_experts, cfg.top_k
        self.weight = nn.Parameter(torch.empty(cfg.num_experts, d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(T, d_model) -> (T, E) fp32 logits (also under autocast: routing is precision-sensitive)."""
        with torch.autocast(x.device.type, enabled=False):
            return F.linear(x.float(), self.weight.float())

    def route(self, x: torch.Tensor, seq_len: int, token_ids: torch.Tensor | None = None) -> Routing:
        """The assignments for the (T, d_model) input x; seq_len splits T into sequences; token_ids
        (T,) are the input tokens (used by token_hash only)."""
        return self.assign(self(x), seq_len)

    # Controllers (aux_free_bias, relu_l1, sigmoid_threshold, softmax_topk's global_batch scope)
    # count during training forwards and update after each optimizer step:
    # `models.moe.balance.update_router_controllers` sums every router's `step_counts()` over the
    # data-parallel ranks in one all-reduce and hands each router its part in `end_step`.
    def step_counts(self) -> torch.Tensor | None:
        """Counts since the last optimizer step that the controller needs summed over ranks (None: none)."""
        return None

    def end_step(self, counts: torch.Tensor | None) -> None:
        """After the optimizer step: update the controller from the rank-summed `counts`, reset them."""

    def assign(self, logits: torch.Tensor, seq_len: int) -> Routing:  # pragma: no cover - abstract
        raise NotImplementedError
