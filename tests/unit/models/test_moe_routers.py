"""Each router against hand-worked examples, the loss formulas, capacity, causal routing and the bias update."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from models.moe.balance import update_expert_biases
from models.moe.config import MoEConfig
from models.moe.routers import build_router, set_causal_routing
from models.moe.routers.base import capacity, capacity_mask, router_z_loss, switch_balance_loss


def make_router(d: int = 4, **kw):
    """A router whose weight is the identity, so logits == input (d == num_experts)."""
    cfg = MoEConfig(**kw)
    r = build_router(cfg, d)
    with torch.no_grad():
        r.weight.copy_(torch.eye(cfg.num_experts, d))
    return r.train()


def assignments(routing):
    """{(token, expert): weight} for easy comparison with a hand-worked table."""
    return {
        (int(t), int(e)): float(w) for t, e, w in zip(routing.token_idx, routing.expert_idx, routing.weight.detach())
    }


L = math.log
# probs: t0 = [.5, .25, .125, .125], t1 = [.1, .1, .6, .2], t2 = t0
X3 = torch.tensor([[L(4), L(2), 0.0, 0.0], [0.0, 0.0, L(6), L(2)], [L(4), L(2), 0.0, 0.0]])


def test_softmax_topk_selection_weights_and_losses():
    r = make_router(num_experts=4, top_k=2, aux_loss_coef=0.01, z_loss_coef=0.001)
    out = r.route(X3, seq_len=3)
    assert assignments(out) == pytest.approx(
        {(0, 0): 0.5, (0, 1): 0.25, (1, 2): 0.6, (1, 3): 0.2, (2, 0): 0.5, (2, 1): 0.25}
    )
    # f = [2, 2, 1, 1] / 6; P = [1.1, 0.6, 0.85, 0.45] / 3; E * sum f P = 4 * 4.7 / 18
    assert out.stats["aux_loss"].item() == pytest.approx(4 * 4.7 / 18, rel=1e-6)
    z = (2 * L(8) ** 2 + L(10) ** 2) / 3
    assert out.stats["z_loss"].item() == pytest.approx(z, rel=1e-6)
    assert out.loss.item() == pytest.approx(0.01 * 4 * 4.7 / 18 + 0.001 * z, rel=1e-6)


def test_softmax_topk_renormalisation():
    r = make_router(num_experts=4, top_k=2, renormalize=True)
    got = assignments(r.route(X3[:2], seq_len=2))
    assert got == pytest.approx({(0, 0): 2 / 3, (0, 1): 1 / 3, (1, 2): 0.75, (1, 3): 0.25})


def test_balance_loss_equals_one_at_perfect_balance():
    probs = torch.tensor([[0.75, 0.25], [0.25, 0.75]])
    top = torch.tensor([[0], [1]])
    assert switch_balance_loss(probs, top, 2).item() == pytest.approx(1.0)
    # ... so the weighted loss is exactly the coefficient (z-loss off)
    r = make_router(d=2, num_experts=2, top_k=1, aux_loss_coef=0.05, z_loss_coef=0.0)
    out = r.route(torch.log(probs), seq_len=2)
    assert out.loss.item() == pytest.approx(0.05)


def test_z_loss_formula():
    logits = torch.tensor([[0.0, 0.0], [1.0, 2.0]])
    expected = (L(2) ** 2 + torch.logsumexp(torch.tensor([1.0, 2.0]), 0).item() ** 2) / 2
    assert router_z_loss(logits).item() == pytest.approx(expected)


def test_capacity_drops_lowest_scoring_assignments():
    # All four tokens want expert 0 (k=1); capacity = ceil(1.0 * 4 * 1 / 2) = 2.
    assert capacity(1.0, 4, 1, 2) == 2
    assert capacity(1.25, 10, 2, 8) == 4  # ceil(3.125)
    expert = torch.tensor([0, 0, 0, 0, 1])
    prio = torch.tensor([0.6, 0.9, 0.7, 0.8, 0.5])
    assert capacity_mask(expert, prio, 2, 2).tolist() == [False, True, False, True, True]
    r = make_router(d=2, num_experts=2, top_k=1)
    x = torch.tensor([[1.0, 0.0], [3.0, 0.0], [2.0, 0.0], [2.5, 0.0]])
    out = r.route(x, seq_len=4).limit_capacity(2, 2)
    assert sorted(assignments(out)) == [(1, 0), (3, 0)]  # the two highest-probability tokens survive
    assert int(out.dropped) == 2 and out.dropped_of == 4


def test_aux_free_bias_selects_with_bias_but_weights_without():
    r = make_router(num_experts=4, top_k=2, router="aux_free_bias")  # sigmoid, renormalised by default
    x = torch.tensor([[2.0, 1.9, 0.1, 0.0]])
    s = torch.sigmoid(x[0]).tolist()
    assert assignments(r.route(x, seq_len=1)) == pytest.approx(
        {(0, 0): s[0] / (s[0] + s[1]), (0, 1): s[1] / (s[0] + s[1])}
    )
    r = make_router(num_experts=4, top_k=2, router="aux_free_bias")
    r.score_bias.copy_(torch.tensor([-0.5, 0.0, 0.0, 0.0]))  # expert 0 now loses to expert 2 in selection
    got = assignments(r.route(x, seq_len=1))
    assert got == pytest.approx({(0, 1): s[1] / (s[1] + s[2]), (0, 2): s[2] / (s[1] + s[2])})


def test_aux_free_bias_update_rule_and_buffers():
    r = make_router(num_experts=4, top_k=1, router="aux_free_bias", bias_update_rate=0.1)
    x = torch.tensor([[3.0, 0, 0, 0], [3.0, 0, 0, 0], [0, 3.0, 0, 0], [3.0, 0, 0, 0]])
    r.route(x, seq_len=4)
    assert r.step_load.tolist() == [3, 1, 0, 0]
    assert update_expert_biases(r) == 1  # mean load 1: sign(1 - [3, 1, 0, 0]) = [-1, 0, 1, 1]
    assert r.score_bias.tolist() == pytest.approx([-0.1, 0.0, 0.1, 0.1])
    assert r.step_load.sum() == 0
    assert "score_bias" in r.state_dict() and "step_load" not in r.state_dict()
    r.eval()
    r.route(x, seq_len=4)
    assert r.step_load.sum() == 0  # evaluation does not count towards the balancing


def test_aux_free_bias_reduces_imbalance_on_skewed_input():
    torch.manual_seed(0)
    r = make_router(d=8, num_experts=8, top_k=2, router="aux_free_bias", bias_update_rate=0.02)
    skew = torch.tensor([2.0, 1.5, 1.0, 0, 0, 0, 0, 0])
    x = torch.randn(512, 8) + skew

    def imbalance():
        load = torch.bincount(r.route(x, seq_len=64).expert_idx, minlength=8).float()
        return (load.max() / load.mean()).item()

    start = imbalance()
    r.step_load.zero_()
    for _ in range(150):
        r.route(x, seq_len=64)
        update_expert_biases(r)
    end = imbalance()
    assert start > 2.5 and end < 1.4, (start, end)  # sign updates leave a small oscillation


def test_sequence_balance_loss_is_one_when_balanced():
    r = make_router(
        d=2,
        num_experts=2,
        top_k=1,
        router="aux_free_bias",
        score_func="softmax",
        seq_aux_loss_coef=0.5,
        z_loss_coef=0.0,
    )
    x = torch.log(torch.tensor([[0.75, 0.25], [0.25, 0.75]]))
    out = r.route(x, seq_len=2)
    assert out.stats["aux_loss"].item() == pytest.approx(1.0)
    assert out.loss.item() == pytest.approx(0.5)


def test_expert_choice_capacity_and_weights():
    p0 = torch.tensor([0.9, 0.8, 0.6, 0.3])  # P(expert 0) per token; P(expert 1) = 1 - p0
    x = torch.stack([torch.log(p0 / (1 - p0)), torch.zeros(4)], 1)
    r = make_router(d=2, num_experts=2, top_k=1, router="expert_choice")  # C = ceil(4 * 1 / 2) = 2
    out = r.route(x, seq_len=4)
    assert assignments(out) == pytest.approx({(0, 0): 0.9, (1, 0): 0.8, (3, 1): 0.7, (2, 1): 0.4})
    assert int(out.dropped) == 0
    r = make_router(d=2, num_experts=2, top_k=1, router="expert_choice", capacity_factor=0.5)  # C = 1
    out = r.route(x, seq_len=4)
    assert assignments(out) == pytest.approx({(0, 0): 0.9, (3, 1): 0.7})
    assert int(out.dropped) == 2 and out.dropped_of == 4  # tokens 1 and 2 got no expert
    assert torch.bincount(out.expert_idx).tolist() == [1, 1]


def test_expert_choice_routes_the_same_in_eval_mode_and_token_choice_only_when_causal():
    p0 = torch.tensor([0.9, 0.8, 0.6, 0.3])
    x = torch.stack([torch.log(p0 / (1 - p0)), torch.zeros(4)], 1)
    r = make_router(d=2, num_experts=2, top_k=1, router="expert_choice")
    trained = assignments(r.route(x, seq_len=4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning any more: eval routes as training does
        assert (
            assignments(r.eval().route(x, seq_len=4))
            == trained
            == pytest.approx({(0, 0): 0.9, (1, 0): 0.8, (3, 1): 0.7, (2, 1): 0.4})
        )
    assert set_causal_routing(r) == 1
    out = r.route(x, seq_len=4)  # each token its top-1 expert: token 2 now prefers expert 0
    assert assignments(out) == pytest.approx({(0, 0): 0.9, (1, 0): 0.8, (2, 0): 0.6, (3, 1): 0.7})
    set_causal_routing(r, False)
    assert assignments(r.route(x, seq_len=4)) == trained


def test_one_bias_update_for_all_layers_equals_the_per_layer_rule():
    """update_expert_biases stacks every aux_free_bias layer's load: each layer gets its own sign
    update (layers with nothing counted keep their bias) and the counts are reset."""
    from models.config import ModelConfig
    from models.gpt import GPT

    cfg = ModelConfig(
        d_model=16,
        n_layers=3,
        n_heads=2,
        vocab_size=32,
        seq_len=8,
        moe={"num_experts": 4, "top_k": 1, "router": "aux_free_bias", "bias_update_rate": 0.1, "first_dense_layers": 1},
    )
    torch.manual_seed(0)
    model = GPT(cfg)
    routers = [m.mlp.router for m in model.model.layers[1:]]
    routers[0].step_load.copy_(torch.tensor([5.0, 1, 1, 1]))
    routers[1].step_load.copy_(torch.tensor([0.0, 0, 4, 4]))
    assert update_expert_biases(model) == 2
    assert routers[0].score_bias.tolist() == pytest.approx([-0.1, 0.1, 0.1, 0.1])
    assert routers[1].score_bias.tolist() == pytest.approx([0.1, 0.1, -0.1, -0.1])
    assert all(r.step_load.sum() == 0 for r in routers)
    update_expert_biases(model)  # nothing counted since: biases stay
    assert routers[0].score_bias.tolist() == pytest.approx([-0.1, 0.1, 0.1, 0.1])
    routers[1].step_load.copy_(torch.tensor([4.0, 0, 0, 0]))
    update_expert_biases(model)
    assert routers[1].score_bias.tolist() == pytest.approx([0.0, 0.2, 0.0, 0.0])


def test_sinkhorn_balances_selection_and_keeps_softmax_weights():
    torch.manual_seed(0)
    r = make_router(d=4, num_experts=4, top_k=1, router="sinkhorn", sinkhorn_iters=20)
    x = torch.randn(256, 4) + torch.tensor([1.5, 0.5, 0, 0])
    out = r.route(x, seq_len=256)
    load = torch.bincount(out.expert_idx, minlength=4).float()
    plain = torch.bincount(x.argmax(-1), minlength=4).float()
    assert load.max() / load.mean() < 1.25 < plain.max() / plain.mean()
    probs = x.softmax(-1)
    assert torch.allclose(out.weight, probs[out.token_idx, out.expert_idx])
    r.eval()
    assert torch.equal(r.route(x, seq_len=256).expert_idx, x.argmax(-1))  # eval: plain top-k


def test_router_logits_stay_fp32_under_bf16_autocast():
    """bf16 under ZeRO-0 runs the forward under autocast; routing decisions need fp32 logits."""
    r = make_router(num_experts=4, top_k=2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = r(X3)
    assert logits.dtype == torch.float32 and torch.equal(logits, X3)
