"""train.activation_checkpointing: the same losses as without it (dense and MoE, ZeRO 0 and 1,
through the CLI), less peak memory in forward+backward (measured with torch's profiler), the MoE
router's per-step state counted once, and bad settings refused before any work."""
from __future__ import annotations

import pytest
import torch

from conftest import REPO, metrics, run_cli, tiny_overrides

TINY = str(REPO / "configs/train/tiny.yaml")
TINY_MOE = str(REPO / "configs/train/tiny-moe.yaml")
MOE = {"model.moe.num_experts": 4, "model.moe.top_k": 2, "model.moe.d_ff": 64}
COMPARED = ("step", "loss", "aux_loss", "grad_norm", "val_loss")


def _train(tiny_data, cwd, kind: str, stage: int, run: str, **extra) -> list[tuple]:
    over = {"train.steps": 6, "train.eval_every_steps": 3, "train.checkpoint_every_steps": 0, "model.n_layers": 3,
            "deepspeed.zero_stage": stage, **(MOE if kind == "moe" else {}), **extra}
    res = run_cli(["train", TINY_MOE if kind == "moe" else TINY, *tiny_overrides(tiny_data, **over), "--run-dir", run,
                   "--no-progress"], cwd)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return [tuple(r.get(k) for k in COMPARED) for r in metrics(cwd / run)]


@pytest.mark.parametrize("kind,stage,mode", [("dense", 0, "full"), ("dense", 1, "every_k"), ("moe", 0, "every_k"),
                                             ("moe", 1, "full")])
def test_checkpointed_run_has_identical_losses(kind, stage, mode, tiny_data, tmp_path):
    plain = _train(tiny_data, tmp_path, kind, stage, "plain")
    extra = {"train.activation_checkpointing": mode}
    if mode == "every_k":
        extra["train.activation_checkpointing_k"] = 2  # blocks 0 and 2 of 3
    ckpt = _train(tiny_data, tmp_path, kind, stage, "ckpt", **extra)
    assert len(plain) == 6 and (plain[0][2] is not None) == (kind == "moe")
    assert ckpt == plain  # bitwise: the recomputation repeats the same fp32 kernels


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
        loads.append([m.router.step_load.clone() for m in model.modules() if hasattr(getattr(m, "router", None), "step_load")])
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


@pytest.mark.parametrize("extra,message", [
    ({"train.activation_checkpointing": "every_k"}, "train.activation_checkpointing_k must be an integer >= 1"),
    ({"train.activation_checkpointing": "every_k", "train.activation_checkpointing_k": 0}, "train.activation_checkpointing_k must be an integer >= 1"),
    ({"train.activation_checkpointing": "full", "train.activation_checkpointing_k": 2}, "train.activation_checkpointing_k is only read"),
    ({"train.activation_checkpointing": "some"}, "train.activation_checkpointing"),
])
def test_bad_checkpointing_settings_exit_2_before_work(extra, message, tiny_data, tmp_path):
    res = run_cli(["train", TINY, *tiny_overrides(tiny_data, **extra), "--run-dir", "run", "--no-progress"], tmp_path)
    assert res.returncode == 2 and message in res.stderr, res.stderr[-2000:]
    assert not (tmp_path / "run").exists()


def test_switching_checkpointing_on_resume_is_allowed(tiny_data, tmp_path):
    """It changes memory, not what is computed: a run resumes across it (a memory fix after an OOM)."""
    over = tiny_overrides(tiny_data, **{"train.steps": 4, "train.eval_every_steps": 0, "train.checkpoint_every_steps": 2})
    flags = ["--run-dir", "run", "--no-progress"]
    assert run_cli(["train", TINY, *over, *flags], tmp_path).returncode == 0
    (tmp_path / "run" / "summary.json").unlink()
    on = ["train.activation_checkpointing=every_k", "train.activation_checkpointing_k=1"]
    res = run_cli(["train", TINY, *over, *on, *flags], tmp_path)
    assert res.returncode == 0 and "resumed from checkpoint step_4" in res.stdout, res.stdout[-2000:] + res.stderr[-2000:]
