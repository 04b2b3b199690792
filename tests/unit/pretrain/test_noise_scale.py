"""Gradient noise scale probe: exact estimator algebra, a quadratic with a known B_simple, and a
tiny GPT (finite values, no side effects on .grad, exact resume through state_dict)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from pretrain.callbacks.noise_scale import GradNoiseProbe


class Quadratic(torch.nn.Module):
    """loss = mean_i 1/2 |theta - x_i|^2 with x_i ~ N(mu, sigma^2 I): per-example gradient
    theta - x_i, so G = theta - mu, tr(Sigma) = D sigma^2 and B_simple = D sigma^2 / |theta - mu|^2."""

    def __init__(self, theta):
        super().__init__()
        self.theta = torch.nn.Parameter(theta.clone())

    def forward(self, x, targets=None, logits=False):
        return SimpleNamespace(loss=0.5 * ((self.theta - x) ** 2).sum(-1).mean(), logits=None)


def test_estimators_recover_exact_values():
    # Build |G_small|^2 and |G_big|^2 from a known |G|^2 and tr(S): E|G_B|^2 = |G|^2 + tr(S)/B.
    g2, trace, bs, bb = 2.0, 300.0, 8.0, 32.0
    small, big = g2 + trace / bs, g2 + trace / bb
    est_g2, est_tr = GradNoiseProbe.estimates(small, big, bs, bb)
    assert est_g2 == pytest.approx(g2) and est_tr == pytest.approx(trace)
    with pytest.raises(ValueError):
        GradNoiseProbe.estimates(small, big, 8, 8)


def test_quadratic_known_noise_scale():
    torch.manual_seed(0)
    dim, sigma, b_true = 64, 1.0, 40.0
    mu = torch.zeros(dim)
    direction = torch.randn(dim)
    theta = mu + direction / direction.norm() * math.sqrt(dim * sigma**2 / b_true)
    model = Quadratic(theta)
    probe = GradNoiseProbe(ema_decay=0.99)
    micro, k = 8, 4
    for _ in range(600):
        batches = []
        for _ in range(k):
            x = mu + sigma * torch.randn(micro, dim)
            batches.append((x, torch.zeros(micro)))  # y.numel() = examples per micro-batch
        out = probe.measure(model, batches)
    assert out["grad_noise_scale_b_small"] == micro and out["grad_noise_scale_b_big"] == micro * k
    assert out["grad_noise_scale"] == pytest.approx(b_true, rel=0.2)
    assert model.theta.grad is None


def test_tiny_gpt_finite_no_side_effects_and_exact_resume():
    from models.config import ModelConfig
    from models.gpt import GPT

    torch.manual_seed(0)
    cfg = ModelConfig(d_model=32, n_layers=2, n_heads=4, vocab_size=64, seq_len=16)
    model = GPT(cfg)
    gen = torch.Generator().manual_seed(1)

    def batches():
        return [
            (torch.randint(0, 64, (2, 16), generator=gen), torch.randint(0, 64, (2, 16), generator=gen))
            for _ in range(4)
        ]

    probe = GradNoiseProbe()
    first = probe.measure(model, batches())
    assert first["grad_noise_scale_b_small"] == 32 and first["grad_noise_scale_b_big"] == 128
    assert math.isfinite(first["grad_noise_scale_trace"]) and first["grad_noise_scale_trace"] > 0
    assert all(p.grad is None for p in model.parameters())
    state = probe.state_dict()
    nxt = batches()
    a = probe.measure(model, nxt)
    resumed = GradNoiseProbe(ema_decay=0.5)
    resumed.load_state_dict(state)
    b = resumed.measure(model, nxt)
    assert a == b


def test_needs_two_batches_and_valid_decay():
    with pytest.raises(ValueError):
        GradNoiseProbe(ema_decay=1.0)
    with pytest.raises(ValueError):
        GradNoiseProbe().measure(Quadratic(torch.zeros(2)), [(torch.zeros(1, 2), torch.zeros(1))])


def test_probe_leaves_aux_free_router_state_and_rng_untouched():
    """The probe's forwards must not count router load (fed into the next bias update) nor move
    the bias or the RNG: a probe step that meets a checkpoint would otherwise not resume exactly."""
    from models.config import ModelConfig
    from models.gpt import GPT

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
    routers = [layer.mlp.router for layer in model.model.layers]
    ids = torch.randint(0, 64, (2, 16))
    model(ids, ids)  # a training forward: counts load for the next bias update
    for r in routers:
        r.score_bias.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
    before = {name: b.clone() for name, b in model.named_buffers()}
    assert any(r.step_load.sum() > 0 for r in routers)
    batches = [(torch.randint(0, 64, (2, 16)), torch.randint(0, 64, (2, 16))) for _ in range(3)]
    rng = torch.get_rng_state()
    out = GradNoiseProbe().measure(model, batches)
    assert math.isfinite(out["grad_noise_scale_trace"])
    for name, b in model.named_buffers():
        assert torch.equal(b, before[name]), name
    assert torch.equal(torch.get_rng_state(), rng)
