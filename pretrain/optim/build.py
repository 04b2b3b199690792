"""The optimizer a run trains with, built from its `optim:` section (`OptimConfig.build`): AdamW over
pretrain/optim/adamw.py's groups, or Muon with its AdamW half (pretrain/optim/muon_build.py).

Returns the optimizer and its record (summary.json's `optimizer`); with muon the split is also
logged once at start. Imports nothing from the config package, so the schema may call it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from pretrain.optim.adamw import adamw_record, param_groups

if TYPE_CHECKING:
    from pretrain.config.schema import OptimConfig

GroupsHook = Callable[[list[dict]], list[dict]]  # AdamW's groups -> the groups handed to the optimizer


def build_optimizer(
    cfg: OptimConfig,
    model: torch.nn.Module,
    lr: float,
    *,
    device: torch.device,
    rank: int,
    world_size: int,
    zero_stage: int,
    prepare_groups: GroupsHook | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[torch.optim.Optimizer, dict]:
    """(optimizer, record). `prepare_groups`: applied to AdamW's groups (MoE expert parallelism);
    Muon keeps experts whole on every rank (ep_size 1, checked by the config)."""
    if cfg.name == "muon":
        from pretrain.optim.muon_build import build_muon, split_text  # deferred: imports torch

        opt, record = build_muon(model, cfg, lr, zero_stage, rank, world_size)
        if log is not None:
            log(split_text(record))
        return opt, record
    groups = param_groups(model, cfg)
    if prepare_groups is not None:
        groups = prepare_groups(groups)
    # fused kernels on GPU; multi-tensor (foreach) updates on CPU, much faster than the per-tensor loop
    fused = {"fused": True} if device.type == "cuda" else {"foreach": True}
    opt = torch.optim.AdamW(groups, lr=lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, **fused)
    return opt, adamw_record(groups)
