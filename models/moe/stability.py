"""Routing stability: how much a model's routing of a fixed probe set changes between two checkpoints.

`expert_sets(model, ids)` runs the probe tokens through the model in eval mode and returns, per
MoE layer, which experts each token ran ((layers, tokens, E) bool; evaluation routing: dropless,
controllers frozen). `routing_change(a, b)` is the fraction of the probe's tokens whose expert set
differs between two such results, averaged over layers (0: identical routing, 1: every token
moved). Early in training routing churns; a router that keeps changing late wastes what its
experts learned.
"""

from __future__ import annotations

import torch
from torch import nn

from models.moe.block import MoEFeedForward


@torch.no_grad()
def expert_sets(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    blocks = [m for m in model.modules() if isinstance(m, MoEFeedForward)]
    was_training = model.training
    model.eval()
    for b in blocks:
        b.record_routing = True
    try:
        model(ids)
    finally:
        for b in blocks:
            b.record_routing = False
        model.train(was_training)
    out = []
    for b in blocks:
        if b.last_routing is None:
            raise RuntimeError("an MoE block did not run on the probe tokens: no routing to compare")
        tok, exp, n = b.last_routing
        b.last_routing = None
        sets = torch.zeros(n, b.num_experts, dtype=torch.bool, device=tok.device)
        sets[tok, exp] = True
        out.append(sets)
    return torch.stack(out)


def routing_change(a: torch.Tensor, b: torch.Tensor) -> float:
    """Fraction of tokens whose expert set differs, mean over layers."""
    if a.shape != b.shape:
        raise ValueError(f"probe routings differ in shape: {tuple(a.shape)} vs {tuple(b.shape)}")
    return (a != b).any(-1).float().mean().item()
