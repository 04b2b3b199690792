"""AdamW parameter groups: decoupled weight decay on matrices only (never norms or biases)."""

from __future__ import annotations

from torch import nn

from pretrain.config.schema import OptimConfig


def param_groups(model: nn.Module, cfg: OptimConfig) -> list[dict]:
    decay, no_decay, seen = [], [], set()
    for _name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:  # tied weights appear once
            continue
        seen.add(id(p))
        (decay if len(param_shape(p)) >= 2 else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": cfg.weight_decay, "name": "decay"},
        {"params": no_decay, "weight_decay": 0.0, "name": "no_decay"},
    ]


def param_shape(p) -> tuple[int, ...]:
    """A parameter's full shape, also when ZeRO-3 holds only a partition of it (`ds_shape`)."""
    return tuple(getattr(p, "ds_shape", None) or p.shape)
