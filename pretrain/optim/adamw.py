"""AdamW parameter groups: decoupled weight decay on matrices only (never norms or biases), and
under mup (models/mup.py) hidden matrices in a group of their own with an lr multiplier.

Every group carries `lr_mult`: the train module sets each group's lr to the schedule's lr times it,
every step (pretrain/engine/train_module.py). Under mup, the hidden group's lr is lr x base_width/d_model
and its weight decay is weight_decay x d_model/base_width, so the decay applied per step (torch's
AdamW multiplies the weights by 1 - lr*weight_decay) is the base model's at every width: the rule of
Microsoft's `mup` package (MuAdamW with its default decoupled_wd=False)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from models.mup import adam_lr_mult, is_mup, param_kind

if TYPE_CHECKING:
    from pretrain.config.schema import OptimConfig


def param_groups(model: nn.Module, cfg: OptimConfig) -> list[dict]:
    mcfg = getattr(model, "cfg", None)
    mup = mcfg is not None and is_mup(mcfg)
    hidden, decay, no_decay, seen = [], [], [], set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:  # tied weights appear once
            continue
        seen.add(id(p))
        shape = param_shape(p)
        if len(shape) < 2:
            no_decay.append(p)
        elif mup and param_kind(name, shape) == "hidden":
            hidden.append(p)
        else:
            decay.append(p)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay, "name": "decay", "lr_mult": 1.0},
        {"params": no_decay, "weight_decay": 0.0, "name": "no_decay", "lr_mult": 1.0},
    ]
    if mup:  # sp keeps its two groups (and the checkpoints written with them)
        mult = adam_lr_mult("hidden", mcfg)
        groups.insert(0, scaled_group(hidden, "hidden", cfg.weight_decay, mult))
    return groups


def scaled_group(params: list, name: str, weight_decay: float, lr_mult: float) -> dict:
    """A group whose lr is lr_mult x the schedule's; lr*weight_decay kept as at lr_mult 1 (see above)."""
    return {"params": params, "weight_decay": weight_decay / lr_mult, "name": name, "lr_mult": lr_mult}


def param_shape(p) -> tuple[int, ...]:
    """A parameter's full shape, also when ZeRO-3 holds only a partition of it (`ds_shape`)."""
    return tuple(getattr(p, "ds_shape", None) or p.shape)


def adamw_record(groups: list[dict]) -> dict:
    """summary.json's `optimizer` for optim.name adamw (pretrain/optim/muon_build.py writes muon's)."""
    ps = [p for g in groups for p in g["params"]]
    return {
        "name": "adamw",
        "muon_tensors": 0,
        "muon_params": 0,
        "adamw_tensors": len(ps),
        "adamw_params": sum(getattr(p, "ds_numel", p.numel()) for p in ps),
    }  # ZeRO-3 Init: full size
