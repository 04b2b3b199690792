"""optim.name muon: the parameter split, the update, whole-matrix sharding over ranks, the CLI run,
exact resume on 1 and 2 ranks (ZeRO-1) and config errors."""

from __future__ import annotations

import torch

from tests.helpers import tiny_model_config


def _groups(moe=None, tie=False):
    from models.gpt import GPT
    from pretrain.config.schema import OptimConfig
    from pretrain.optim.muon_build import muon_param_groups

    model = GPT(tiny_model_config(300, moe=moe, tie_embeddings=tie))
    names = {id(p): n for n, p in model.named_parameters()}
    groups = muon_param_groups(model, OptimConfig(name="muon"))
    return {g["name"]: sorted(names[id(p)] for p in g["params"]) for g in groups}, groups


def test_split_dense_moe_and_tied_embeddings():
    dense, _ = _groups()
    assert dense["muon"] == sorted(
        f"model.layers.{i}.{m}.weight"
        for i in (0, 1)
        for m in (
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.o_proj",
            "mlp.gate_proj",
            "mlp.up_proj",
            "mlp.down_proj",
        )
    )
    assert dense["adamw_decay"] == ["lm_head.weight", "model.embed_tokens.weight"]
    assert all("norm" in n for n in dense["adamw_no_decay"]) and len(dense["adamw_no_decay"]) == 5
    tied, _ = _groups(tie=True)  # one tensor, counted once, under AdamW
    assert tied["adamw_decay"] == ["model.embed_tokens.weight"] and tied["muon"] == dense["muon"]
    moe, groups = _groups(moe={"num_experts": 4, "top_k": 2})
    assert "model.layers.0.mlp.experts.gate_proj" in moe["muon"]  # (E, d_ff, d): per-expert matrices
    assert "model.layers.0.mlp.router.weight" in moe["adamw_decay"]
    assert not any("router" in n or "embed" in n or "norm" in n for n in moe["muon"])
    from pretrain.config.schema import OptimConfig
    from pretrain.optim.muon_build import split_summary, split_text

    s = split_summary(groups, OptimConfig(name="muon"), "balanced", 2)
    assert s["muon_tensors"] == len(moe["muon"]) == 14 and s["adamw_params"] > 0
    assert "Muon 14 tensors" in split_text(s)


def test_update_matches_torch_muon_and_stacks_orthogonalise_per_matrix():
    from pretrain.optim.muon import MuonAdamW, newton_schulz

    torch.manual_seed(0)
    w = torch.randn(24, 40)
    a, b = torch.nn.Parameter(w.clone()), torch.nn.Parameter(w.clone())
    ours = MuonAdamW([{"params": [a], "use_muon": True, "weight_decay": 0.1}], lr=0.02, ns_dtype=torch.bfloat16)
    ref = torch.optim.Muon([b], lr=0.02, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")  # bf16 Newton-Schulz
    for _ in range(3):
        g = torch.randn(24, 40)
        a.grad, b.grad = g.clone(), g.clone()
        ours.step(), ref.step()
    assert torch.allclose(a, b, atol=2e-3), (a - b).abs().max()
    # a (E, m, n) stack: each expert's matrix orthogonalised on its own, singular values near 1
    stack = torch.randn(3, 16, 48) * torch.tensor([1.0, 10.0, 0.01]).view(3, 1, 1)
    out = newton_schulz(stack, 5)
    for e in range(3):
        assert torch.allclose(out[e], newton_schulz(stack[e], 5), atol=1e-5)
        s = torch.linalg.svdvals(out[e])
        assert 0.5 < s.min() and s.max() < 1.3


def test_balanced_assignment_is_balanced_and_flat_is_not():
    from pretrain.optim.muon_ranks import assign, balanced, ns_flops

    assert balanced([8, 7, 6, 5, 4], 2) == [0, 1, 1, 0, 0]  # largest first onto the least loaded
    # a GPT-like layer list: big MLP matrices and small attention ones, in model order
    shapes = [(64, 64), (32, 64), (32, 64), (64, 64), (256, 64), (256, 64), (64, 256)] * 4
    kinds = ["muon"] * len(shapes)
    costs = [ns_flops(s, 5) for s in shapes]
    for world in (2, 3, 4):
        bal = assign("balanced", kinds, shapes, world)
        load = bal.load(costs, world)
        assert all(len(w) == 1 for w in bal.workers)  # every matrix whole, on exactly one rank
        assert max(load) - min(load) <= max(costs)  # the greedy bound
        assert max(load) / (sum(costs) / world) < 1.1
        flat = assign("flat", kinds, shapes, world)
        done = sum(flat.load(costs, world))
        # matrices cut by a chunk boundary are done by each rank holding a piece (not at 2
        # and 4 ranks: the cuts fall between layers there)
        assert done > sum(costs) if world == 3 else done == sum(costs)
    rep = assign("replicated", kinds, shapes, 2)
    assert rep.load(costs, 2) == [sum(costs)] * 2
