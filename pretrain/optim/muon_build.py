"""optim.name muon: which parameters Muon updates, and the optimizer built for DeepSpeed.

Muon takes the transformer blocks' weight matrices: attention q/k/v/o and MLP projections (2-D),
and MoE expert weights, whose (E, out, in) tensors are stacks of matrices orthogonalised one
expert at a time. AdamW takes the token embedding, the output head (tied or not: a lookup table
and a classifier are not hidden linear maps), norms, biases and MoE router weights (a router's
few rows pick experts; orthogonalising them would equalise the experts' logits' scales).

Under mup every group carries the `lr_mult` of models/mup.py: Muon's own (`muon_lr_mult`: 1, or
1/width ratio with match_rms_adamw), and for the AdamW half the routers (hidden matrices) go into
a group with AdamW's 1/width ratio; weight decay is divided by the multiplier, as in pretrain/optim/adamw.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from models.mup import adam_lr_mult, is_mup, muon_lr_mult, param_kind
from pretrain.optim.adamw import scaled_group

if TYPE_CHECKING:
    from pretrain.config.schema import OptimConfig


def is_muon_param(name: str, p) -> bool:
    parts = name.split(".")
    in_block = "layers" in parts
    return in_block and p.dim() in (2, 3) and "router" not in parts and "embed_tokens" not in parts


def muon_param_groups(model: nn.Module, cfg: OptimConfig) -> list[dict]:
    """Three groups, each tagged `use_muon`: Muon matrices (weight decay), AdamW decay (embeddings,
    head, routers), AdamW no-decay (norms, biases). Tied weights appear once (as the embedding).
    Under mup a fourth, AdamW hidden (routers), and Muon's lr multiplier (module docstring)."""
    mcfg = getattr(model, "cfg", None)
    mup = mcfg is not None and is_mup(mcfg)
    muon, hidden, decay, no_decay, names, seen = [], [], [], [], {"muon": [], "adamw": []}, set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        if is_muon_param(name, p):
            muon.append(p)
            names["muon"].append(name)
        else:
            if p.dim() < 2:
                no_decay.append(p)
            elif mup and param_kind(name, tuple(p.shape)) == "hidden":
                hidden.append(p)
            else:
                decay.append(p)
            names["adamw"].append(name)
    muon_mult = muon_lr_mult(mcfg, cfg.muon_adjust_lr) if mup else 1.0
    hidden_mult = adam_lr_mult("hidden", mcfg) if mup else 1.0
    groups = [
        {**scaled_group(muon, "muon", cfg.weight_decay, muon_mult), "use_muon": True},
        {**scaled_group(hidden, "adamw_hidden", cfg.weight_decay, hidden_mult), "use_muon": False},
        {"params": decay, "weight_decay": cfg.weight_decay, "use_muon": False, "name": "adamw_decay", "lr_mult": 1.0},
        {"params": no_decay, "weight_decay": 0.0, "use_muon": False, "name": "adamw_no_decay", "lr_mult": 1.0},
    ]
    return [g for g in groups if g["params"]]


def split_summary(groups: list[dict], cfg: OptimConfig, assignment: str, world_size: int) -> dict:
    """The record written to summary.json's `optimizer` and printed at start."""

    def count(use_muon: bool) -> tuple[int, int]:
        ps = [p for g in groups if g["use_muon"] is use_muon for p in g["params"]]
        return len(ps), sum(p.numel() for p in ps)

    (mt, mp), (at, ap) = count(True), count(False)
    out = {"name": cfg.name, "muon_tensors": mt, "muon_params": mp, "adamw_tensors": at, "adamw_params": ap}
    if cfg.name == "muon":
        out.update(
            momentum=cfg.momentum,
            nesterov=cfg.nesterov,
            ns_steps=cfg.ns_steps,
            adjust_lr=cfg.muon_adjust_lr,
            assignment=assignment,
            world_size=world_size,
        )
    return out


def split_text(s: dict) -> str:
    total = s["muon_params"] + s["adamw_params"]
    share = 100.0 * s["muon_params"] / total if total else 0.0
    return (
        f"optimizer {s['name']}: Muon {s['muon_tensors']} tensors / {s['muon_params']:,} params ({share:.1f}%), "
        f"AdamW {s['adamw_tensors']} tensors / {s['adamw_params']:,} params"
        + (f"; updates {s['assignment']} over {s['world_size']} rank(s)" if s["name"] == "muon" else "")
    )


def build_muon(
    model: nn.Module,
    cfg: OptimConfig,
    lr: float,
    zero_stage: int,
    rank: int,
    world_size: int,
    assignment: str | None = None,
):
    """(MuonAdamW, its split record). ZeRO-1 shares whole tensors out over the ranks (`balanced`);
    ZeRO-0 updates everything on every rank (`replicated`). `assignment` overrides (benchmarks)."""
    from pretrain.optim.muon import MuonAdamW  # deferred: imports torch

    mode = assignment or ("balanced" if zero_stage == 1 else "replicated")
    groups = muon_param_groups(model, cfg)
    opt = MuonAdamW(
        groups,
        lr=lr,
        momentum=cfg.momentum,
        nesterov=cfg.nesterov,
        ns_steps=cfg.ns_steps,
        adjust_lr=cfg.muon_adjust_lr,
        betas=(cfg.beta1, cfg.beta2),
        eps=cfg.eps,
        mode=mode,
        rank=rank,
        world_size=world_size,
    )
    return opt, split_summary(groups, cfg, mode, world_size)
