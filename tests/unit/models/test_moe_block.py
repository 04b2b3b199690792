"""The MoE block: dispatch against a naive per-token reference, grouped GEMM path, layer
selection, capacity in the block, shared experts, and the model end to end."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from models.config import ModelConfig
from models.gpt import GPT
from models.layers import SwiGLU
from models.moe.block import MoEFeedForward
from models.moe.config import MoEConfig
from models.moe.dispatch import LocalDispatcher
from models.moe.experts import has_grouped_mm
from models.moe.routers.base import Routing


def naive_moe(block: MoEFeedForward, x: torch.Tensor) -> torch.Tensor:
    """Per-token reference: y_t = sum over t's surviving assignments of w * SwiGLU_e(x_t)."""
    flat = x.reshape(-1, x.shape[-1])
    r = block.router.route(flat, seq_len=x.shape[-2])
    cfg = block.moe_cfg
    if cfg.capacity_factor is not None and r.priority is not None:
        from models.moe.routers.base import capacity

        r = r.limit_capacity(capacity(cfg.capacity_factor, flat.shape[0], cfg.top_k, cfg.num_experts), cfg.num_experts)
    ex = block.experts
    y = torch.zeros_like(flat)
    for t, e, w in zip(r.token_idx.tolist(), r.expert_idx.tolist(), r.weight):
        h = F.silu(ex.gate_proj[e] @ flat[t]) * (ex.up_proj[e] @ flat[t])
        y[t] = y[t] + w * (ex.down_proj[e] @ h)
    if block.shared_mlp is not None:
        y = y + block.shared_mlp(flat)[0]
    return y.view(x.shape)


def make_block(**kw) -> MoEFeedForward:
    torch.manual_seed(0)
    return MoEFeedForward(16, MoEConfig(**{"num_experts": 4, "top_k": 2, **kw}), d_ff=24)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"capacity_factor": 0.75},
        {"router": "aux_free_bias", "num_shared_experts": 1},
        {"router": "expert_choice"},
        {"router": "sinkhorn", "top_k": 1},
    ],
)
def test_dispatch_matches_naive_reference(kw):
    block = make_block(**kw)
    x = torch.randn(3, 10, 16, requires_grad=True)
    y, aux = block(x)
    ref = naive_moe(block, x)
    assert torch.allclose(y, ref, atol=1e-5)
    g = torch.randn_like(y)
    gx, gw = torch.autograd.grad((y * g).sum(), [x, block.experts.down_proj])
    rx, rw = torch.autograd.grad((ref * g).sum(), [x, block.experts.down_proj])
    assert torch.allclose(gx, rx, atol=1e-5) and torch.allclose(gw, rw, atol=1e-5)
    assert aux.loss.dim() == 0 and aux.loss.requires_grad


def test_dropped_tokens_pass_through_as_zero():
    block = make_block(top_k=1, capacity_factor=0.25)  # capacity 3 of 12 tokens per expert... at most 12 kept
    x = torch.randn(1, 12, 16)
    y, aux = block(x)
    kept = (y.abs().sum(-1) > 0).sum().item()
    dropped = aux.stats["dropped_frac"].item() * 12
    assert kept + dropped == pytest.approx(12)
    assert kept <= 4 * 1  # num_experts * capacity(0.25, 12, 1, 4) = 4 * 1


@pytest.mark.skipif(not has_grouped_mm(), reason="torch.nn.functional.grouped_mm not in this torch")
def test_grouped_mm_path_matches_slices():
    """The CUDA path (torch.nn.functional.grouped_mm), forced on CPU where this torch has a kernel for it."""
    block = make_block()
    x = torch.randn(2, 8, 16, requires_grad=True)
    block.experts.grouped_mm = "off"
    y0, _ = block(x)
    block.experts.grouped_mm = "on"
    try:
        y1, _ = block(x)
    except RuntimeError as exc:  # pragma: no cover - CPU kernel missing in some builds
        pytest.skip(f"no CPU grouped_mm kernel: {exc}")
    assert torch.allclose(y0, y1, atol=1e-5)
    g = torch.randn_like(y0)
    a = torch.autograd.grad((y0 * g).sum(), [x, block.experts.gate_proj])
    b = torch.autograd.grad((y1 * g).sum(), [x, block.experts.gate_proj])
    assert all(torch.allclose(u, v, atol=1e-5) for u, v in zip(a, b))


def test_auto_uses_slices_on_cpu():
    block = make_block()
    assert not block.experts.use_grouped_mm(torch.randn(4, 16))
    assert not block.experts.use_grouped_mm(torch.randn(4, 16, dtype=torch.bfloat16))
    block.experts.grouped_mm = "off"
    assert not block.experts.use_grouped_mm(torch.randn(4, 16))


def test_local_dispatcher_groups_rows_by_expert_and_combines_with_weights():
    """dispatch: rows in expert order (token order kept within an expert), counts per expert;
    combine: gate-weighted sum back onto the tokens, zero for a token with no assignment."""
    x = torch.arange(1.0, 5.0).repeat_interleave(2).view(4, 2)  # token t's row is [t+1, t+1]
    routing = Routing(
        token_idx=torch.tensor([0, 0, 2, 3, 3]),
        expert_idx=torch.tensor([2, 0, 2, 0, 2]),
        weight=torch.tensor([0.5, 0.25, 1.0, 2.0, 3.0]),
        probs=torch.zeros(4, 3),
    )
    d = LocalDispatcher(3)
    rows, counts, ctx = d.dispatch(x, routing)
    assert rows[:, 0].tolist() == [1, 4, 1, 3, 4] and counts.tolist() == [2, 0, 3]
    y = d.combine(rows * 10, ctx)  # an "expert" multiplying by 10
    assert y[:, 0].tolist() == [10 * 1 * (0.5 + 0.25), 0, 10 * 3 * 1, 10 * 4 * (2 + 3)]  # token 1: no expert


def test_every_ffn_returns_output_and_aux():
    """Block.forward unpacks (y, aux) from any FFN: None for SwiGLU, MoEAux for MoE layers."""
    x = torch.randn(2, 5, 16)
    y, aux = SwiGLU(16, 32)(x)
    assert y.shape == x.shape and aux is None
    y, aux = make_block()(x)
    assert y.shape == x.shape and aux.loss.dim() == 0


@pytest.mark.parametrize(
    "every,first,expected", [(1, 0, [0, 1, 2, 3, 4, 5]), (2, 0, [1, 3, 5]), (1, 2, [2, 3, 4, 5]), (2, 1, [2, 4])]
)
def test_layer_selection(every, first, expected):
    cfg = ModelConfig(
        d_model=16,
        n_layers=6,
        n_heads=2,
        vocab_size=64,
        seq_len=8,
        moe={"every_k_layers": every, "first_dense_layers": first},
    )
    model = GPT(cfg)
    moe = [i for i, b in enumerate(model.model.layers) if isinstance(b.mlp, MoEFeedForward)]
    assert moe == expected == cfg.moe.moe_layers(6)


def test_gpt_with_moe_forward_backward_and_stats():
    cfg = ModelConfig(
        d_model=32,
        n_layers=2,
        n_heads=2,
        vocab_size=64,
        seq_len=16,
        moe={"num_experts": 4, "top_k": 2, "d_ff": 32, "router": "aux_free_bias"},
    )
    torch.manual_seed(0)
    model = GPT(cfg)
    ids = torch.randint(0, 64, (2, 16))
    out = model(ids, ids)
    assert out.aux_loss is not None and len(out.router_stats) == 2
    assert [s["layer"] for s in out.router_stats] == [0, 1]
    (out.loss + out.aux_loss).backward()
    assert model.model.layers[0].mlp.experts.gate_proj.grad is not None
    assert model.model.layers[0].mlp.router.weight.grad is not None
    sd = model.state_dict()
    assert "model.layers.0.mlp.router.score_bias" in sd
    assert sd["model.layers.1.mlp.experts.down_proj"].shape == (4, 32, 32)
    # Deterministic construction (needed so EP ranks build identical models before sharding).
    torch.manual_seed(0)
    again = GPT(cfg)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_capacity_applies_in_training_only():
    block = make_block(top_k=1, capacity_factor=0.25)
    x = torch.randn(1, 12, 16)
    _, aux = block(x)
    assert aux.stats["dropped_frac"].item() > 0
    block.eval()
    y, aux = block(x)
    assert aux.stats["dropped_frac"].item() == 0 and (y.abs().sum(-1) > 0).all()


@pytest.mark.parametrize("router", ["softmax_topk", "aux_free_bias", "expert_choice", "sinkhorn"])
def test_moe_forward_backward_under_bf16_autocast(router):
    """bf16 under ZeRO-0 keeps fp32 parameters and runs the forward under autocast."""
    cfg = ModelConfig(
        d_model=32,
        n_layers=2,
        n_heads=2,
        vocab_size=64,
        seq_len=16,
        moe={"num_experts": 4, "top_k": 2, "d_ff": 32, "router": router, "num_shared_experts": 1},
    )
    torch.manual_seed(0)
    model = GPT(cfg)
    ids = torch.randint(0, 64, (2, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(ids, ids)
    ref = model(ids, ids)
    assert out.loss.item() == pytest.approx(ref.loss.item(), rel=1e-2)
    (out.loss + out.aux_loss).backward()
    assert model.model.layers[0].mlp.experts.gate_proj.grad.dtype == torch.float32
