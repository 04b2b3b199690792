"""The trainer's CUDA paths on a GPU (`cuda` mark; skipped without CUDA; benchmarks/gpu_check.py runs
them on a GPU node): bf16 autocast at ZeRO-0, Muon's bf16 Newton-Schulz, torch.compile through
DeepSpeed, the pinned-memory prefetch, ZeRO-3's partitioned init drawing from the CUDA generator,
and MFU against the accelerator table's peak. Training runs are real `scalelab train` processes
on tiny models; their data is the prepared folder benchmarks/gpu_check.py names in
SCALELAB_PREPARED_DATA (the node has no corpus), else the suite's tiny data set."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.helpers import REPO, metrics, run_cli

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.fixture()
def base(request, tmp_path_factory) -> Path:
    """configs/train/tiny.yaml training on a prepared folder (a one-component mixture)."""
    given = os.environ.get("SCALELAB_PREPARED_DATA")
    data = Path(given) if given else request.getfixturevalue("tiny_data")
    cfg = yaml.safe_load((REPO / "configs/train/tiny.yaml").read_text())
    cfg["data"] = {"name": data.name, "mixture": {"check": {"weight": 1.0, "data": str(data)}}}
    cfg["wandb"] = {"mode": "disabled"}
    path = tmp_path_factory.mktemp("cuda-base") / "base.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def train(base: Path, run: Path, **over) -> list[dict]:
    settings = {
        "model": "n50k",
        "model.seq_len": 64,
        "model.vocab_size": None,
        "train.tokens": None,
        "train.steps": 6,
        "train.micro_batch_size": 8,
        "train.global_batch_size": 8,
        "train.log_every_steps": 1,
        "train.eval_every_steps": 0,
        "train.checkpoint_every_steps": 0,
        "schedule.warmup_steps": 1,
        **over,
    }
    args = ["train", str(base), *(f"{k}={'null' if v is None else v}" for k, v in settings.items())]
    res = run_cli([*args, "--run-dir", str(run), "--no-progress"], run.parent, process=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return metrics(run)


def test_bf16_autocast_at_zero0_tracks_fp32(base, tmp_path):
    """ZeRO-0 bf16 is fp32 weights under torch.autocast (pretrain/engine/ds_config.py): on the GPU the
    losses stay within bf16 rounding of the fp32 run's, and the run says it used the bf16 peak."""
    fp32 = train(base, tmp_path / "fp32", precision="fp32", **{"train.tf32": False})
    bf16 = train(base, tmp_path / "bf16", precision="bf16")
    assert [r["step"] for r in bf16] == [r["step"] for r in fp32]
    for a, b in zip(fp32, bf16, strict=True):
        assert math.isfinite(b["loss"]) and b["loss"] == pytest.approx(a["loss"], rel=1e-2), a["step"]
    summary = json.loads((tmp_path / "bf16" / "summary.json").read_text())
    assert summary["peak_source"].startswith("table:") and summary["peak_source"].endswith(":bf16")


def test_muon_newton_schulz_runs_in_bf16_on_cuda_and_orthogonalises():
    """On CUDA Muon orthogonalises in bf16 by default (pretrain/optim/muon.py): its update equals an
    explicit bf16 Newton-Schulz bit for bit, differs from the fp32 one, and stays within bf16
    rounding of a float64 iteration."""
    from pretrain.optim.muon import MuonAdamW, newton_schulz

    torch.manual_seed(0)
    g = torch.randn(256, 128, device="cuda")

    def update(ns_dtype):
        p = torch.nn.Parameter(torch.zeros(256, 128, device="cuda"))
        p.grad = g.clone()
        kw = dict(lr=1.0, momentum=0.0, nesterov=False, adjust_lr="none", ns_dtype=ns_dtype)
        MuonAdamW([{"params": [p], "use_muon": True}], **kw).step()
        return -p.detach()

    default, bf16, fp32 = update(None), update(torch.bfloat16), update(torch.float32)
    assert torch.equal(default, bf16) and not torch.equal(default, fp32)
    ref = newton_schulz(g.double(), 5, torch.float64).float()
    torch.testing.assert_close(default, ref, atol=3e-2, rtol=3e-2)  # bf16: 8 mantissa bits
    s = torch.linalg.svdvals(default.float())
    assert 0.5 < float(s.min()) and float(s.max()) < 1.3  # Newton-Schulz's quintic band, not a unit SVD


def test_torch_compile_through_deepspeed_trains_like_eager(base, tmp_path):
    eager = train(base, tmp_path / "eager", precision="bf16")
    compiled = train(base, tmp_path / "compiled", precision="bf16", **{"train.compile": True})
    for a, b in zip(eager, compiled, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-2), a["step"]


def test_prefetch_pins_host_batches_and_copies_them_to_the_gpu():
    from pretrain.engine.prefetch import Prefetcher
    from pretrain.feed.sampler import WindowSampler, micro_batch_start

    sampler = WindowSampler(np.arange(50_000, dtype=np.uint16) % 997, 16, seed=2)
    pinned = []

    def read(step, micro):
        x, y = sampler.batch(micro_batch_start(step, micro, 0, 8, 4, 1), 4)
        return x, y

    pf = Prefetcher(read, grad_accum=2, total_steps=3, device=torch.device("cuda"))
    load = pf._load

    def spy(step, micro):
        x, y = load(step, micro)
        pinned.append(x.is_pinned() and y.is_pinned())
        return x, y

    pf._load = spy
    try:
        for step in range(3):
            for micro in range(2):
                x, y = pf.get(step, micro)
                assert x.is_cuda and y.is_cuda
                ex, ey = read(step, micro)
                assert torch.equal(x.cpu(), ex) and torch.equal(y.cpu(), ey)
    finally:
        pf.close()
    assert pinned and all(pinned) and pf.hits == 5


def test_zero3_partitioned_init_draws_from_the_cuda_generator(base, tmp_path):
    """Under ZeRO-3 with zero_init the parameters are created on the GPU: the same seed gives the
    same weights in every ZeRO-3 run (and they train), not the CPU-built ones (docstring of
    pretrain/engine/zero_init.py)."""
    over = {"deepspeed.zero_stage": 3, "precision": "bf16", "train.steps": 2}
    a = train(base, tmp_path / "a", **over)
    b = train(base, tmp_path / "b", **over)
    cpu_built = train(base, tmp_path / "c", **over, **{"deepspeed.zero_init": False})
    assert [r["loss"] for r in a] == [r["loss"] for r in b]  # same seed, same CUDA draws
    assert a[0]["loss"] != cpu_built[0]["loss"]  # other draws: the CPU generator's
    assert all(math.isfinite(r["loss"]) for r in a)


def test_mfu_peak_is_the_tables_and_a_bf16_matmul_reaches_most_of_it():
    from pretrain.callbacks.speed_monitor import device_peak

    dev = torch.device("cuda", 0)
    peak, source = device_peak(dev, "bf16")
    name = torch.cuda.get_device_name(dev)
    assert source == f"table:{name}:bf16", f"{name} is not in rundir/accelerators.py: MFU would be NaN"
    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        a @ b
    end.record()
    torch.cuda.synchronize()
    measured = 2 * n**3 * 10 / (start.elapsed_time(end) / 1e3)
    # the datasheet's dense peak bounds what a matmul reaches; a wrong table row shows as > 1 or << 1
    assert 0.5 < measured / peak <= 1.05, (name, measured, peak)
