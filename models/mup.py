"""μP (maximal-update parametrization, Yang et al. 2022, "Tensor Programs V"): the width rules.

With m = d_model / mup_base_width (the width multiplier; 1 at the base, where μP equals sp):

| kind     | tensors                                                  | init std       | AdamW lr |
|----------|----------------------------------------------------------|----------------|----------|
| `hidden` | attention q/k/v/o, MLP and MoE expert matrices, routers  | init_std/sqrt(m)| lr / m   |
| `vector` | token embedding (tied or not), norms, biases             | init_std       | lr       |
| `output` | the untied output head                                   | init_std       | lr       |

and the forward multiplies the logits by 1/m and scales attention scores by
sqrt(mup_base_head_dim) / head_dim (1/head_dim, equal to sp's 1/sqrt(head_dim) at the base head dim).
This is the table of Cerebras-GPT / "A practitioner's guide to μP"; one multiplier m for every
hidden matrix assumes d_ff and head count grow with d_model (the default d_ff does). A router
(d_model -> experts) has one width dimension, like the head, but its Adam update must shrink as
1/m just as a hidden matrix's does (its logits sum d_model coordinates), so it counts as hidden.
The optimizer builders (pretrain/optim/adamw.py, pretrain/optim/muon_build.py) turn kinds into param groups;
this module knows no optimizer.
"""

from __future__ import annotations

import math

from models.config import ModelConfig

KINDS = ("hidden", "vector", "output")


def is_mup(cfg: ModelConfig) -> bool:
    return cfg.parametrization == "mup"


def _base_width(cfg: ModelConfig) -> int:
    if cfg.mup_base_width is None:  # ModelConfig requires it under mup; a config built around the check lacks it
        raise ValueError("model.mup_base_width is required with model.parametrization: mup")
    return cfg.mup_base_width


def width_mult(cfg: ModelConfig) -> float:
    """m = d_model / mup_base_width under mup; 1 under sp."""
    return cfg.d_model / _base_width(cfg) if is_mup(cfg) else 1.0


def base_head_dim(cfg: ModelConfig) -> int:
    return cfg.mup_base_head_dim or max(1, _base_width(cfg) // cfg.n_heads)


def attention_scale(cfg: ModelConfig) -> float:
    """Softmax scale of the attention scores: 1/sqrt(head_dim) under sp, sqrt(base)/head_dim under mup
    (q·k of aligned vectors grows as head_dim once features move, so 1/sqrt(d) would let it grow)."""
    if not is_mup(cfg):
        return 1.0 / math.sqrt(cfg.head_dim)
    return math.sqrt(base_head_dim(cfg)) / cfg.head_dim


def logit_scale(cfg: ModelConfig) -> float:
    """Multiplier on the output logits: 1/m under mup (the head's Adam update then moves logits by O(1))."""
    return 1.0 / width_mult(cfg)


def param_kind(name: str, shape: tuple[int, ...]) -> str:
    """`hidden`, `vector` or `output` for a parameter of a GPT, by name and full shape (under ZeRO-3
    pass the full `ds_shape`, not the local partition's)."""
    parts = name.split(".")
    if len(shape) < 2 or "embed_tokens" in parts:
        return "vector"
    if parts[0] == "lm_head":
        return "output"
    return "hidden"


def init_std(cfg: ModelConfig, name: str, shape: tuple[int, ...]) -> float:
    """The normal init std of a matrix: init_std, divided by sqrt(m) for hidden matrices under mup;
    residual output projections (o_proj, down_proj) also by sqrt(2 n_layers) (GPT-2), in both."""
    std = cfg.init_std
    if param_kind(name, shape) == "hidden":
        std /= math.sqrt(width_mult(cfg))
        if name.endswith(("o_proj.weight", "down_proj.weight")) or ".down_proj" in name:
            std /= math.sqrt(2 * cfg.n_layers)
    return std


def adam_lr_mult(kind: str, cfg: ModelConfig) -> float:
    """AdamW lr multiplier of a kind: 1/m for hidden matrices, 1 otherwise (1 everywhere under sp)."""
    return 1.0 / width_mult(cfg) if kind == "hidden" else 1.0


def muon_lr_mult(cfg: ModelConfig, adjust_lr: str) -> float:
    """lr multiplier of the Muon (hidden-matrix) half. Muon's orthogonalised update has spectral norm 1;
    `original` and `none` scale it by a function of the aspect ratio only, which does not change when
    d_model and d_ff grow together: that is already μP's spectral condition (Bernstein et al. 2023),
    so 1. `match_rms_adamw` rescales it to AdamW's per-entry RMS (0.2 sqrt(max dim)), which then
    needs AdamW's 1/m."""
    return 1.0 / width_mult(cfg) if adjust_lr == "match_rms_adamw" else 1.0


def base_shapes(cfg: ModelConfig) -> dict:
    """What summary.json records of the parametrization (the base shapes a transfer is relative to)."""
    out: dict = {"parametrization": cfg.parametrization}
    if is_mup(cfg):
        out.update(
            mup_base_width=cfg.mup_base_width,
            mup_base_head_dim=base_head_dim(cfg),
            mup_width_mult=width_mult(cfg),
        )
    return out
