"""Token dispatchers: bring each assignment's row to its expert, and the experts' rows back.

`dispatch(x, routing) -> (rows, counts, ctx)`: `rows` are the assigned tokens' rows grouped by
local expert (`counts[j]` rows for local expert j), ready for one grouped expert call;
`combine(out, ctx)` scales the experts' output rows by the gate weights and sums them back onto
their tokens (dropped tokens get zero: the block's residual carries them).

- `LocalDispatcher`: every expert lives on this rank. Assignments are sorted by expert (stable,
  so token order is kept within an expert), gathered, and scattered back with `index_add_`.
- `AllToAllDispatcher`: experts are sharded over an expert-parallel process group, rank r of it
  owning experts [r*E_local, (r+1)*E_local). The expert-sorted rows are already grouped by
  destination rank, so one all-to-all (variable splits) sends them; the receiver regroups them
  by local expert; `combine` undoes the regrouping and a second all-to-all returns them. Routing
  and capacity stay local to each rank, so results do not depend on the expert-parallel size.

Expert parallelism swaps the block's dispatcher object (`pretrain.engine.expert_parallel`); nothing
here knows how the group was made. Only torch.distributed is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

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


@dataclass
class DispatchContext:
    """What `combine` needs to undo `dispatch`."""

    token_idx: torch.Tensor  # (A,) token of each expert-sorted assignment
    weight: torch.Tensor  # (A,) its gate weight
    x: torch.Tensor  # the (T, d) input: shape and dtype of the combined output
    # expert parallel only: rows sent to / received from each rank, and the regrouping permutation
    send_splits: list[int] | None = None
    recv_splits: list[int] | None = None
    regroup: torch.Tensor | None = None


class LocalDispatcher:
    """All `num_experts` experts on this rank."""

    def __init__(self, num_experts: int):
        self.num_experts = num_experts

    def dispatch(self, x: torch.Tensor, routing: Routing) -> tuple[torch.Tensor, torch.Tensor, DispatchContext]:
        order = torch.argsort(routing.expert_idx, stable=True)
        tok, w = routing.token_idx[order], routing.weight[order]
        counts = torch.bincount(routing.expert_idx, minlength=self.num_experts)
        return x[tok], counts, DispatchContext(token_idx=tok, weight=w, x=x)

    def combine(self, out: torch.Tensor, ctx: DispatchContext) -> torch.Tensor:
        ys = out * ctx.weight.unsqueeze(-1).to(out.dtype)
        # Under autocast (bf16 with fp32 parameters, ZeRO-0) the experts return bf16 for fp32 x:
        # combine in x's dtype.
        return torch.zeros_like(ctx.x).index_add_(0, ctx.token_idx, ys.to(ctx.x.dtype))


class AllToAllDispatcher(LocalDispatcher):
    """Experts sharded over `group` (size ep_size); this rank runs E / ep_size of them."""

    def __init__(self, num_experts: int, group):
        super().__init__(num_experts)
        self.group = group
        self.ep_size = dist.get_world_size(group)
        if num_experts % self.ep_size:
            raise ValueError(f"{num_experts} experts cannot be split over {self.ep_size} expert-parallel ranks")
        self.local_experts = num_experts // self.ep_size

    def dispatch(self, x: torch.Tensor, routing: Routing) -> tuple[torch.Tensor, torch.Tensor, DispatchContext]:
        rows, counts, ctx = super().dispatch(x, routing)
        ep, e_local = self.ep_size, self.local_experts
        # recv[src, j]: rows that rank `src` sends for my local expert j.
        recv = torch.empty_like(counts)
        dist.all_to_all_single(recv, counts.contiguous(), group=self.group)
        recv = recv.view(ep, e_local)
        ctx.send_splits = counts.view(ep, e_local).sum(1).tolist()
        ctx.recv_splits = recv.sum(1).tolist()
        got = all_to_all(rows, ctx.recv_splits, ctx.send_splits, self.group)  # ordered (source rank, local expert)
        label = torch.arange(e_local, device=x.device).repeat(ep).repeat_interleave(recv.reshape(-1))
        ctx.regroup = torch.argsort(label, stable=True)  # -> (local expert, source rank)
        return got[ctx.regroup], recv.sum(0), ctx

    def combine(self, out: torch.Tensor, ctx: DispatchContext) -> torch.Tensor:
        if ctx.regroup is None or ctx.send_splits is None or ctx.recv_splits is None:
            raise RuntimeError("combine: the context is not from this dispatcher's dispatch (no splits)")
        back = torch.empty_like(out).index_copy_(0, ctx.regroup, out)  # undo the regrouping
        mine = all_to_all(back, ctx.send_splits, ctx.recv_splits, self.group)
        return super().combine(mine, ctx)
