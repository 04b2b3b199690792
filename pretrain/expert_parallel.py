"""Expert parallelism for a built scalelab model, through DeepSpeed's MoE machinery.

`models/` knows nothing of DeepSpeed (torchtitan style); this file applies EP afterwards:

1. creates DeepSpeed's expert-parallel / expert-data-parallel groups (`deepspeed.utils.groups`),
2. keeps only this rank's slice of every MoE layer's stacked expert weights (the model was built
   whole and identically on every rank first, so EP=2 starts from the same weights as EP=1),
3. marks those weights as DeepSpeed MoE params (`allreduce=False`, `group_name`) so gradients are
   reduced over the expert-data-parallel group only, and hands the EP group to the dispatcher,
   which then exchanges tokens with all-to-all,
4. makes the engine recognise each MoE block as a DeepSpeed MoE layer (class swap with
   `deepspeed.moe.layer.MoE` as a mixin), so ZeRO and `save_checkpoint`/`load_checkpoint` use
   their MoE paths; state-dict hooks present the stacked weights under DeepSpeed's per-expert key
   layout (`...deepspeed_moe.experts.deepspeed_experts.<id>.<name>`), one file per global expert,
5. splits the optimizer param groups with `split_params_into_different_moe_groups_for_optimizer`.

With ep_size == 1 (or one rank) nothing is changed: experts are replicated like any weight and
checkpoints are ordinary ones.
"""
from __future__ import annotations

import functools
import warnings

import torch
from torch import nn

from models.moe.block import MoEFeedForward
from models.moe.config import MoEConfig
from pretrain.errors import ConfigError

EXPERT_WEIGHTS = ("gate_proj", "up_proj", "down_proj")
DS_EXPERT_PREFIX = "deepspeed_moe.experts.deepspeed_experts"


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
    import deepspeed
    from deepspeed import comm as ds_comm
    from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer
    from deepspeed.utils import groups

    if not ds_comm.is_initialized():
        deepspeed.init_distributed()
    name = f"ep_size_{ep}"
    if name not in groups._get_expert_parallel_group_dict():
        groups._create_expert_and_data_parallel(ep)
    ep_group = groups._get_expert_parallel_group(name)
    ep_rank = groups._get_expert_parallel_rank(name)
    for block in moe_blocks(model):
        shard_experts(block, ep, ep_rank, ep_group, name)
    named = [g if "name" in g else {**g, "name": f"group{i}"} for i, g in enumerate(param_groups)]
    return split_params_into_different_moe_groups_for_optimizer(named)


def shard_experts(block: MoEFeedForward, ep_size: int, ep_rank: int, ep_group, group_name: str) -> None:
    """Keep experts [ep_rank*E/ep, (ep_rank+1)*E/ep) of `block` and route through `ep_group`."""
    e_local = block.num_experts // ep_size
    lo = ep_rank * e_local
    for wname in EXPERT_WEIGHTS:
        p = getattr(block.experts, wname)
        p.data = p.data[lo : lo + e_local].clone()  # same Parameter object: param groups stay valid
        p.allreduce = False
        p.group_name = group_name
    block.experts.num_experts = e_local
    block.ep_group, block.ep_size = ep_group, ep_size
    block.__class__ = _deepspeed_moe_class(type(block))
    block.expert_group_name = group_name
    block.num_local_experts = e_local
    block.register_state_dict_post_hook(_to_deepspeed_keys)
    block.register_load_state_dict_pre_hook(_from_deepspeed_keys)


def _set_deepspeed_parallelism(self, use_data_before_expert_parallel_: bool = False) -> None:
    """Called by the engine; the groups were created by prepare_moe already."""


@functools.cache
def _deepspeed_moe_class(cls: type) -> type:
    from deepspeed.moe.layer import MoE

    # Our forward/attributes first; MoE only makes `isinstance(block, MoE)` true for the engine.
    return type(f"DeepSpeed{cls.__name__}", (cls, MoE), {
        "set_deepspeed_parallelism": _set_deepspeed_parallelism,
        "__module__": __name__,
    })


def _to_deepspeed_keys(module, state_dict, prefix, local_metadata) -> None:
    for wname in EXPERT_WEIGHTS:
        w = state_dict.pop(f"{prefix}experts.{wname}")
        for i in range(w.shape[0]):
            state_dict[f"{prefix}{DS_EXPERT_PREFIX}.{i}.{wname}"] = w[i]


def _from_deepspeed_keys(module, state_dict, prefix, local_metadata, strict, missing, unexpected, errors) -> None:
    n = module.num_local_experts
    for wname in EXPERT_WEIGHTS:
        keys = [f"{prefix}{DS_EXPERT_PREFIX}.{i}.{wname}" for i in range(n)]
        if all(k in state_dict for k in keys):
            state_dict[f"{prefix}experts.{wname}"] = torch.stack([state_dict.pop(k) for k in keys])
