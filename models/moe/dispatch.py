"""Token dispatch: sort assignments by expert, run the experts on contiguous slices, combine.

Local (no expert parallelism): gather the assigned rows in expert order, one grouped call to the
experts, scale by the gate weights and scatter-add back to the tokens.

Expert parallel (`group` set by `pretrain.expert_parallel`): rank r of the EP group owns experts
[r*E_local, (r+1)*E_local). The expert-sorted rows are already grouped by destination rank, so one
all-to-all (variable splits) sends them, the receiver regroups them by local expert, runs its
experts, undoes the regrouping and a second all-to-all returns them. Only torch.distributed is
used here; routing and capacity decisions stay local to each rank, so results do not depend on
ep_size.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from models.moe.experts import GroupedExperts
from models.moe.routers.base import Routing


class _AllToAll(torch.autograd.Function):
    """all_to_all_single with variable splits; the backward is the reverse exchange."""

    @staticmethod
    def forward(ctx, x, out_splits: list[int], in_splits: list[int], group):
        ctx.out_splits, ctx.in_splits, ctx.group = out_splits, in_splits, group
        out = x.new_empty(sum(out_splits), *x.shape[1:])
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        back = grad.new_empty(sum(ctx.in_splits), *grad.shape[1:])
        dist.all_to_all_single(back, grad.contiguous(), ctx.in_splits, ctx.out_splits, group=ctx.group)
        return back, None, None, None


def all_to_all(x: torch.Tensor, out_splits: list[int], in_splits: list[int], group) -> torch.Tensor:
    return _AllToAll.apply(x, out_splits, in_splits, group)


def sort_by_expert(routing: Routing) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(token_idx, weight) in expert order (stable: token order within an expert) and the permutation."""
    order = torch.argsort(routing.expert_idx, stable=True)
    return routing.token_idx[order], routing.weight[order], order


def dispatch_combine(
    x: torch.Tensor,
    routing: Routing,
    experts: GroupedExperts,
    num_experts: int,
    group=None,
    ep_size: int = 1,
) -> torch.Tensor:
    """y[t] = sum over t's surviving assignments (e, w) of w * expert_e(x[t]); x: (T, d)."""
    tok, w, _ = sort_by_expert(routing)
    counts = torch.bincount(routing.expert_idx, minlength=num_experts)
    xs = x[tok]
    if group is None or ep_size == 1:
        ys = experts(xs, counts)
    else:
        ys = _expert_parallel(xs, counts, experts, group, ep_size)
    ys = ys * w.unsqueeze(-1).to(ys.dtype)
    # Under autocast (bf16 with fp32 parameters, ZeRO-0) the experts return bf16 for fp32 x:
    # combine in x's dtype.
    return torch.zeros_like(x).index_add_(0, tok, ys.to(x.dtype))


def _expert_parallel(xs: torch.Tensor, counts: torch.Tensor, experts: GroupedExperts, group, ep_size: int):
    e_local = counts.numel() // ep_size
    # recv[src, j]: rows that rank `src` sends for my local expert j.
    recv = torch.empty_like(counts)
    dist.all_to_all_single(recv, counts.contiguous(), group=group)
    recv = recv.view(ep_size, e_local)
    in_splits = counts.view(ep_size, e_local).sum(1).tolist()
    out_splits = recv.sum(1).tolist()
    got = all_to_all(xs, out_splits, in_splits, group)  # ordered (source rank, local expert)
    label = torch.arange(e_local, device=xs.device).repeat(ep_size).repeat_interleave(recv.reshape(-1))
    perm = torch.argsort(label, stable=True)  # -> (local expert, source rank)
    out = experts(got[perm], recv.sum(0))
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(perm.numel(), device=perm.device)
    back = out[inverse]
    return all_to_all(back, in_splits, out_splits, group)
