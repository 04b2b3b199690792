"""Routers, selectable by name (`model.moe.router`); one small module each."""

from __future__ import annotations

from torch import nn

from models.moe.config import MoEConfig
from models.moe.routers.aux_free_bias import AuxFreeBiasRouter
from models.moe.routers.base import Router, Routing
from models.moe.routers.expert_choice import ExpertChoiceRouter
from models.moe.routers.relu_l1 import ReluL1Router
from models.moe.routers.sigmoid_threshold import SigmoidThresholdRouter
from models.moe.routers.sinkhorn import SinkhornRouter
from models.moe.routers.softmax_topk import SoftmaxTopKRouter
from models.moe.routers.token_hash import TokenHashRouter

ROUTERS: dict[str, type[Router]] = {
    "softmax_topk": SoftmaxTopKRouter,
    "aux_free_bias": AuxFreeBiasRouter,
    "expert_choice": ExpertChoiceRouter,
    "sinkhorn": SinkhornRouter,
    "relu_l1": ReluL1Router,
    "token_hash": TokenHashRouter,
    "sigmoid_threshold": SigmoidThresholdRouter,
}


def set_causal_routing(model: nn.Module, causal: bool = True) -> int:
    """Route every token from its own scores only, for callers that need causality (generation,
    lm-eval scoring). Changes the routers whose training routing looks at the whole batch
    (expert_choice: token-choice top-k over the same probabilities instead); others are causal
    already. Evaluation of the validation loss keeps the training routing. Returns how many
    routers were switched."""
    routers = [m for m in model.modules() if isinstance(m, ExpertChoiceRouter)]
    for r in routers:
        r.causal = causal
    return len(routers)


def build_router(cfg: MoEConfig, d_model: int) -> Router:
    try:
        cls = ROUTERS[cfg.router]
    except KeyError:
        raise ValueError(f"model.moe.router={cfg.router!r} is unknown; allowed: {', '.join(ROUTERS)}") from None
    return cls(cfg, d_model)


__all__ = ["ROUTERS", "Router", "Routing", "build_router", "set_causal_routing"]
