"""The routers added for the router study (relu_l1, sigmoid_threshold, token_hash) and the balance
loss scope: shapes, controllers that hold the mean experts per token at top_k on a synthetic
stream, exact resume of controller state, and the health metrics they feed."""

from __future__ import annotations

import io

import pytest
import torch

from models.config import ModelConfig
from models.gpt import GPT
from models.moe.balance import update_router_controllers
from models.moe.block import MoEFeedForward
from models.moe.config import MoEConfig
from models.moe.metrics import summarize
from models.moe.routers import build_router
from models.moe.routers.base import sequence_switch_loss, switch_balance_loss
from models.moe.routers.token_hash import hash_experts


def router(d=16, **kw):
    torch.manual_seed(0)
    return build_router(MoEConfig(**kw), d).train()


@pytest.mark.parametrize("name", ["relu_l1", "sigmoid_threshold", "token_hash"])
def test_block_shapes_and_assignments(name):
    torch.manual_seed(0)
    block = MoEFeedForward(16, MoEConfig(num_experts=4, top_k=2, router=name), 24)
    x = torch.randn(3, 5, 16)
    ids = torch.randint(0, 50, (3, 5))
    y, aux = block(x, ids) if name == "token_hash" else block(x)
    assert y.shape == x.shape and torch.isfinite(y).all()
    s = aux.stats
    assert s["tokens"] == 15 and s["load"].shape == (4,) and s["k_hist"].shape == (5,)
    assert s["k_hist"].sum().item() == 15 and s["routed"] == s["load"].sum().item()
    aux.loss.backward()  # the router loss reaches the router
    assert block.router.weight.grad is not None


def test_sigmoid_threshold_controller_holds_mean_k_and_balances():
    """Fixed router, skewed synthetic stream: after the controller settles, the mean experts per
    token over 100 steps is top_k within 2%, and no expert is far from its k/E share."""
    r = router(d=16, num_experts=8, top_k=2, router="sigmoid_threshold")
    gen = torch.Generator().manual_seed(1)
    skew = torch.linspace(1.0, -1.0, 16)
    ks, loads = [], torch.zeros(8)
    for step in range(400):
        x = torch.randn(256, 16, generator=gen) + skew
        out = r.route(x, seq_len=64)
        if step >= 300:
            ks.append(out.expert_idx.numel() / 256)
            loads += torch.bincount(out.expert_idx, minlength=8)
        update_router_controllers(r)
    assert sum(ks) / len(ks) == pytest.approx(2.0, rel=0.02)
    share = loads / loads.sum()
    assert (share.max() / share.mean()).item() < 1.1
    k_tok = torch.bincount(out.token_idx, minlength=256)
    assert k_tok.min() >= 1 and k_tok.max() > 2  # variable k per token, at least threshold_min_experts


def test_relu_l1_controller_holds_mean_k_while_training():
    """A router trained by a loss that pushes every logit up (as a task that wants more experts
    would) against the adaptive L1: the controller sets the coefficient so that the mean active
    experts per token is top_k. Inputs have a nonzero mean, like RMS-normed hidden states (on
    zero-mean inputs a bias-free ReLU router keeps half its experts on whatever its weights)."""
    r = router(d=16, num_experts=8, top_k=2, router="relu_l1", l1_coef_init=1e-3, l1_target_rate=1.05)
    opt = torch.optim.SGD(r.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(2)
    ks = []
    for step in range(600):
        x = torch.randn(256, 16, generator=gen) + 1.0
        out = r.route(x, seq_len=64)
        (out.loss - 0.1 * r(x).mean()).backward()
        opt.step()
        opt.zero_grad()
        if step >= 400:
            ks.append(out.expert_idx.numel() / 256)
        update_router_controllers(r)
    assert sum(ks) / len(ks) == pytest.approx(2.0, rel=0.02)
    assert r.l1_coef.item() > 1e-3  # it had to grow from its start


@pytest.mark.parametrize(
    "kw", [dict(router="sigmoid_threshold"), dict(router="relu_l1"), dict(router="aux_free_bias")], ids=str
)
def test_controller_state_resumes_bitwise(kw):
    """Save mid-stream, load into a fresh router, continue both: identical state, bit for bit."""
    a = router(num_experts=4, top_k=2, **kw)
    gen = torch.Generator().manual_seed(3)
    xs = [torch.randn(64, 16, generator=gen) + 0.3 for _ in range(20)]
    for x in xs[:10]:
        a.route(x, seq_len=16)
        update_router_controllers(a)
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    b = build_router(a.cfg, 16).train()
    buf.seek(0)
    b.load_state_dict(torch.load(buf))
    for x in xs[10:]:
        ra, rb = a.route(x, seq_len=16), b.route(x, seq_len=16)
        assert torch.equal(ra.expert_idx, rb.expert_idx) and torch.equal(ra.weight, rb.weight)
        update_router_controllers(a)
        update_router_controllers(b)
    state_a, state_b = a.state_dict(), b.state_dict()
    assert state_a.keys() == state_b.keys() and len(state_a) >= 2  # the weight and the controller's buffer
    for k in state_a:
        assert torch.equal(state_a[k], state_b[k]), k


def test_token_hash_is_a_fixed_balanced_function_of_the_token():
    ids = torch.arange(4096)
    e = hash_experts(ids, 8, 2)
    assert e.shape == (4096, 2) and (e[:, 0] != e[:, 1]).all()
    share = torch.bincount(e.reshape(-1), minlength=8).float() / e.numel()
    assert (share - 1 / 8).abs().max() < 0.01
    r = router(num_experts=8, top_k=2, router="token_hash")
    x = torch.randn(6, 16)
    tok = torch.tensor([5, 9, 5, 7, 9, 5])
    out = r.route(x, seq_len=6, token_ids=tok)
    got = out.expert_idx.view(6, 2)
    assert torch.equal(got[0], got[2]) and torch.equal(got[0], got[5]) and torch.equal(got, hash_experts(tok, 8, 2))
    with pytest.raises(ValueError, match="token_hash routes by token id"):
        r.route(x, seq_len=6)


def test_aux_loss_scopes():
    torch.manual_seed(0)
    x = torch.randn(12, 16)
    mb = router(num_experts=4, top_k=1, z_loss_coef=0.0)
    seq = router(num_experts=4, top_k=1, z_loss_coef=0.0, aux_loss_scope="sequence")
    out = mb.route(x, seq_len=4)
    probs = mb(x).softmax(-1)
    top = probs.topk(1, -1).indices
    assert out.stats["aux_loss"].item() == pytest.approx(switch_balance_loss(probs, top, 4).item())
    per_seq = [switch_balance_loss(probs[i : i + 4], top[i : i + 4], 4).item() for i in (0, 4, 8)]
    assert seq.route(x, seq_len=4).stats["aux_loss"].item() == pytest.approx(sum(per_seq) / 3, rel=1e-6)
    assert sequence_switch_loss(probs, top, 4, 12).item() == pytest.approx(out.stats["aux_loss"].item())

    # global_batch: micro-batch 2's loss uses the loads of micro-batches 1 and 2 (over two "ranks":
    # a reducer that doubles the counts, as the all-reduce of two identical ranks would)
    g = router(num_experts=4, top_k=1, z_loss_coef=0.0, aux_loss_scope="global_batch")
    g.count_reducer = lambda c: 2 * c
    x1, x2 = x[:6], x[6:]
    g.route(x1, seq_len=6)
    loss2 = g.route(x2, seq_len=6).stats["aux_loss"].item()
    counts = torch.bincount(top.reshape(-1), minlength=4).float()
    f = counts / counts.sum()
    assert loss2 == pytest.approx(4 * (f * probs[6:].mean(0)).sum().item(), rel=1e-6)
    assert g.global_load.sum().item() == 24  # 12 assignments counted twice (two ranks)
    update_router_controllers(g)  # the step ends: loads reset
    assert g.global_load.sum().item() == 0
    g.eval()
    assert g.route(x2, seq_len=6).stats["aux_loss"].item() == pytest.approx(
        switch_balance_loss(probs[6:], top[6:], 4).item(), rel=1e-6
    )
    assert g.global_load.sum().item() == 0  # evaluation counts nothing


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match="aux_loss_scope=global_batch applies to router softmax_topk"):
        MoEConfig(router="aux_free_bias", aux_loss_scope="global_batch")
    with pytest.raises(ValueError, match="threshold_min_experts=3 must be <= model.moe.top_k=2"):
        MoEConfig(router="sigmoid_threshold", threshold_min_experts=3)
    with pytest.raises(ValueError, match="l1_target_rate"):
        MoEConfig(router="relu_l1", l1_target_rate=1.0)


def test_health_metrics_of_one_forward():
    """Loads [6, 2, 0, 0] over 4 experts, 4 tokens running 2, 2, 3, 1 experts."""
    stats = [
        {
            "layer": 0,
            "load": torch.tensor([5.0, 2, 1, 0]),
            "tokens": 4,
            "routed": 8,
            "k_hist": torch.tensor([0.0, 1, 2, 1, 0]),
            "dropped": 0,
            "dropped_of": 8,
            "entropy": torch.tensor(1.0),
        }
    ]
    m = summarize(stats)
    frac = [5 / 8, 2 / 8, 1 / 8, 0]
    import math

    h = -sum(p * math.log(p) for p in frac if p > 0) / math.log(4)
    assert m["moe/layer0/load_entropy"] == pytest.approx(h)
    assert m["moe/dead_experts"] == 1  # share 0 < 1/16; 1/8 is not
    assert m["moe/active_experts"] == pytest.approx(2.0)
    assert [m[f"moe/k_frac/k{j}"] for j in range(5)] == pytest.approx([0, 0.25, 0.5, 0.25, 0])
    assert m["moe/k_std"] == pytest.approx(math.sqrt(0.5))
    assert m["moe/imbalance_micro"] == pytest.approx(5 / 2) == m["moe/imbalance"]
    two = summarize([stats[0], stats[0] | {"load": torch.tensor([0.0, 2, 1, 5])}])  # two micro-batches
    assert two["moe/imbalance"] == pytest.approx(5 / 4) and two["moe/imbalance_micro"] == pytest.approx(2.5)


def tiny_gpt(router_name: str, **moe) -> GPT:
    cfg = ModelConfig(
        d_model=16,
        n_layers=2,
        n_heads=2,
        vocab_size=64,
        seq_len=16,
        moe={"num_experts": 4, "top_k": 2, "router": router_name, "d_ff": 16, **moe},
    )
    torch.manual_seed(0)
    return GPT(cfg)


EVAL_ROUTERS = ["softmax_topk", "aux_free_bias", "sinkhorn", "relu_l1", "sigmoid_threshold", "token_hash"]


@pytest.mark.parametrize("name", EVAL_ROUTERS + ["expert_choice_causal"])
def test_eval_loss_per_token_is_the_same_at_batch_1_and_batch_n(name):
    """Token-choice routers route each token from its own scores at evaluation (controllers frozen):
    the per-token validation loss of a sequence does not depend on the other sequences of its
    batch. Controllers first take a few steps so thresholds and biases are not at their start."""
    from models.moe.routers import set_causal_routing

    model = tiny_gpt(name.removesuffix("_causal"), capacity_factor=1.0)  # capacity: training only
    gen = torch.Generator().manual_seed(4)
    for _ in range(5):
        model(torch.randint(0, 64, (4, 16), generator=gen))
        update_router_controllers(model)
    if name == "expert_choice_causal":
        set_causal_routing(model)
    model.eval()
    x = torch.randint(0, 64, (6, 16), generator=gen)
    y = torch.randint(0, 64, (6, 16), generator=gen)
    with torch.no_grad():
        batch = torch.nn.functional.cross_entropy(model(x).logits.transpose(1, 2), y, reduction="none")
        one = torch.cat(
            [
                torch.nn.functional.cross_entropy(
                    model(x[i : i + 1]).logits.transpose(1, 2), y[i : i + 1], reduction="none"
                )
                for i in range(6)
            ]
        )
    assert torch.allclose(batch, one, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sigmoid_threshold", "relu_l1", "token_hash"])
def test_heldout_eval_loss_is_the_same_at_eval_batch_1_and_4(name):
    """The trainer's validation loss (pretrain.evaluation.HeldOutEval) of a variable-k router does not
    depend on the evaluation batch size, and reports the realised experts per token per layer."""
    import numpy as np

    from pretrain.evaluation import HeldOutEval

    model = tiny_gpt(name)
    gen = torch.Generator().manual_seed(5)
    for _ in range(3):
        model(torch.randint(0, 64, (4, 16), generator=gen))
        update_router_controllers(model)
    tokens = np.random.default_rng(0).integers(0, 64, 8 * 17 + 1)
    one = HeldOutEval(tokens, 16, 8 * 16, 1.0, 1).run(model, torch.device("cpu"))
    four = HeldOutEval(tokens, 16, 8 * 16, 1.0, 4).run(model, torch.device("cpu"))
    assert one["val_loss"] == pytest.approx(four["val_loss"], rel=1e-6)
    assert one["val_active_experts"] == pytest.approx(four["val_active_experts"])
    assert set(four) >= {"val_active_experts/layer0", "val_active_experts/layer1"}
