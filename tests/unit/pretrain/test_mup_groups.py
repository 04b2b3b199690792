"""pretrain/optim/adamw.py and optim_muon.py under mup: hidden matrices (attention, MLP, experts, routers)
in a group with lr x base_width/d_model and weight decay x d_model/base_width; embeddings, head,
norms unscaled; sp keeps its two groups."""

from __future__ import annotations

import pytest
import torch

from models.config import ModelConfig
from models.gpt import GPT
from pretrain.config.schema import OptimConfig
from pretrain.optim.adamw import param_groups
from pretrain.optim.muon_build import muon_param_groups


def model(**kw) -> GPT:
    torch.manual_seed(0)
    base = dict(d_model=64, n_layers=2, n_heads=4, vocab_size=64, seq_len=16, moe=dict(num_experts=4, top_k=2))
    return GPT(ModelConfig(**(base | kw)))


def names(m, group) -> set[str]:
    ids = {id(p) for p in group["params"]}
    return {n for n, p in m.named_parameters() if id(p) in ids}


@pytest.mark.parametrize("tie", [False, True])
def test_adamw_groups(tie):
    m = model(parametrization="mup", mup_base_width=16, tie_embeddings=tie)
    groups = {g["name"]: g for g in param_groups(m, OptimConfig(weight_decay=0.1))}
    assert list(groups) == ["hidden", "decay", "no_decay"]
    h, d = groups["hidden"], groups["decay"]
    assert (h["lr_mult"], h["weight_decay"]) == (0.25, pytest.approx(0.4))
    assert (d["lr_mult"], d["weight_decay"], groups["no_decay"]["weight_decay"]) == (1.0, 0.1, 0.0)
    hidden = names(m, h)
    assert "model.layers.0.mlp.experts.down_proj" in hidden and "model.layers.1.mlp.router.weight" in hidden
    assert all(n.split(".")[-2] in ("q_proj", "k_proj", "v_proj", "o_proj", "router", "experts") for n in hidden)
    assert len(hidden) == 2 * (4 + 3 + 1)  # per layer: attention 4, expert stacks 3, router 1
    assert names(m, d) == ({"model.embed_tokens.weight"} | (set() if tie else {"lm_head.weight"}))
    n_params = len({id(p) for p in m.parameters()})
    assert sum(len(g["params"]) for g in groups.values()) == n_params


def test_sp_groups_unchanged():
    groups = param_groups(model(), OptimConfig(weight_decay=0.1))
    assert [(g["name"], g["lr_mult"], g["weight_decay"]) for g in groups] == [
        ("decay", 1.0, 0.1),
        ("no_decay", 1.0, 0.0),
    ]


@pytest.mark.parametrize("adjust,muon_mult", [("match_rms_adamw", 0.25), ("original", 1.0), ("none", 1.0)])
def test_muon_groups(adjust, muon_mult):
    m = model(parametrization="mup", mup_base_width=16)
    groups = {g["name"]: g for g in muon_param_groups(m, OptimConfig(name="muon", muon_adjust_lr=adjust))}
    assert groups["muon"]["lr_mult"] == muon_mult and groups["muon"]["use_muon"] is True
    assert groups["adamw_hidden"]["lr_mult"] == 0.25 and not groups["adamw_hidden"]["use_muon"]
    assert names(m, groups["adamw_hidden"]) == {f"model.layers.{i}.mlp.router.weight" for i in range(2)}
    assert groups["adamw_decay"]["lr_mult"] == 1.0
