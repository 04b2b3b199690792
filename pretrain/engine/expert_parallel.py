"""Expert parallelism for a built scalelab model, on public APIs only.

`models/` knows nothing of DeepSpeed (torchtitan style); `prepare_moe` applies EP afterwards,
before `deepspeed.initialize`:

1. Expert-parallel process groups come from `torch.distributed.new_group`: blocks of ep_size
   consecutive ranks, the layout DeepSpeed gives its own expert groups (checked once DeepSpeed
   has made them, see `ShardedExperts.set_deepspeed_parallelism`).
2. Every MoE block keeps only its EP rank's slice of the stacked expert weights (the model was
   built whole and identically on every rank first, so EP=2 starts from the same weights as EP=1)
   and gets an `AllToAllDispatcher` on that group in place of its `LocalDispatcher`.
3. The slice lives in a `ShardedExperts`, a subclass of DeepSpeed's documented MoE layer
   (`deepspeed.moe.layer.MoE`, built through its constructor). That is how the engine learns
   which parameters are experts: it creates its expert / expert-data-parallel groups through the
   layer's `set_deepspeed_parallelism`, reduces expert gradients over the expert-data-parallel
   group only (ZeRO-0), partitions them over that group (ZeRO-1/2), and saves them in its
   per-expert checkpoint files. Only the layer's parameter bookkeeping is used: scalelab's
   router and dispatcher do the routing and the all-to-all, so DeepSpeed's gate weight is removed.
   To DeepSpeed, each EP rank's block of E/ep experts is one "expert" holding one stacked tensor
   per weight, so the grouped expert kernel runs on it with no per-step copy; checkpoint file
   `layer_<l>_expert_<r>_mp_rank_00_model_states.pt` holds EP rank r's experts
   [r*E/ep, (r+1)*E/ep) under `...mlp.experts.deepspeed_moe.experts.deepspeed_experts.<r>.<w>`
   (`rundir.weights.restack_experts` reads it back as the model's (E, ...) tensors).
4. The optimizer param groups are split with DeepSpeed's public
   `deepspeed.moe.utils.split_params_into_different_moe_groups_for_optimizer`.

DeepSpeed's MoE path rejects ZeRO-3, so ep_size > 1 needs ZeRO 0-2 (checked by the config).
With ep_size == 1 (or one rank) nothing is changed: experts are replicated like any weight and
checkpoints are ordinary ones.
"""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist
from deepspeed.moe.layer import MoE
from torch import nn

from models.moe.block import MoEFeedForward
from models.moe.config import MoEConfig
from models.moe.dispatch import AllToAllDispatcher
from models.moe.experts import GroupedExperts
from pretrain.errors import ConfigError

EXPERT_WEIGHTS = ("gate_proj", "up_proj", "down_proj")


def moe_blocks(model: nn.Module) -> list[MoEFeedForward]:
    return [m for m in model.modules() if isinstance(m, MoEFeedForward)]


def prepare_moe(model: nn.Module, moe_cfg: MoEConfig, world_size: int, param_groups: list[dict]) -> list[dict]:
    """Apply expert parallelism before `deepspeed.initialize`; returns the optimizer param groups."""
    ep = moe_cfg.ep_size
    if ep <= 1 or world_size <= 1:
        if ep > 1:
            warnings.warn(f"model.moe.ep_size={ep} with a single rank: experts stay unsharded", stacklevel=2)
        return param_groups
    if world_size % ep:
        raise ConfigError(f"model.moe.ep_size={ep} must divide the number of ranks ({world_size})")
    import deepspeed  # deferred: imports deepspeed
    from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer  # deferred: imports deepspeed

    if not deepspeed.comm.is_initialized():
        deepspeed.init_distributed()
    group, ranks = expert_parallel_group(ep)
    replaced: dict[int, nn.Parameter] = {}
    for block in moe_blocks(model):
        old = {w: getattr(block.experts, w) for w in EXPERT_WEIGHTS}
        shard_experts(block, group, ranks)
        replaced.update({id(p): getattr(block.experts.local, w) for w, p in old.items()})
    named = [
        {**g, "name": g.get("name", f"group{i}"), "params": [replaced.get(id(p), p) for p in g["params"]]}
        for i, g in enumerate(param_groups)
    ]
    return split_params_into_different_moe_groups_for_optimizer(named)


def expert_parallel_group(ep_size: int):
    """(this rank's expert-parallel group, its ranks): blocks of ep_size consecutive ranks.

    Every rank creates every group, in the same order, as `new_group` requires."""
    world, rank = dist.get_world_size(), dist.get_rank()
    mine = None
    for start in range(0, world, ep_size):
        ranks = list(range(start, start + ep_size))
        g = dist.new_group(ranks)
        if rank in ranks:
            mine = (g, ranks)
    return mine


def shard_experts(block: MoEFeedForward, group, ranks: list[int]) -> None:
    """Keep this rank's experts of `block` in a ShardedExperts and exchange tokens over `group`."""
    ep = len(ranks)
    ep_rank = ranks.index(dist.get_rank())
    full = block.experts
    e_local = block.num_experts // ep
    local = GroupedExperts(e_local, full.d_model, full.d_ff, full.grouped_mm)
    lo = ep_rank * e_local
    for w in EXPERT_WEIGHTS:
        getattr(local, w).data = getattr(full, w).data[lo : lo + e_local].clone()
    block.experts = ShardedExperts(local, ep, ranks)
    block.dispatcher = AllToAllDispatcher(block.num_experts, group)


class ShardedExperts(MoE):
    """DeepSpeed's MoE layer holding one EP rank's experts; called like GroupedExperts."""

    def __init__(self, local: GroupedExperts, ep_size: int, ep_ranks: list[int]):
        # One DeepSpeed "expert" per EP rank: this rank's stacked block of experts.
        super().__init__(hidden_size=local.d_model, expert=local, num_experts=ep_size, ep_size=ep_size, k=1)
        # DeepSpeed's top-k gate is never called (scalelab's router picks the experts): drop its
        # weight so that it is neither trained nor saved (the gate object stays: the engine hands
        # it the expert-parallel group).
        self.deepspeed_moe.gate.wg = None
        self.ep_ranks = ep_ranks

    @property
    def local(self) -> GroupedExperts:
        return self.deepspeed_moe.experts.deepspeed_experts[0]

    def forward(self, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """Rows grouped by local expert -> expert outputs (GroupedExperts' contract)."""
        return self.local(x, counts)

    def set_deepspeed_parallelism(self, use_data_before_expert_parallel_: bool = False) -> None:
        """Called by the engine: DeepSpeed makes its groups. They must pair ranks as ours do, or its
        checkpoint numbering would not match the experts this rank holds."""
        super().set_deepspeed_parallelism(use_data_before_expert_parallel_)
        theirs = dist.get_process_group_ranks(self.deepspeed_moe.ep_group)
        if theirs != self.ep_ranks:
            raise RuntimeError(
                f"DeepSpeed's expert-parallel group {theirs} differs from scalelab's {self.ep_ranks}; "
                "leave DeepSpeed's use_data_before_expert_parallelism unset"
            )
