"""Held-out evaluation over ranks whose every forward holds collectives: the window count does not
divide by the world size, yet every rank runs the same number of forwards (padding masked out),
so nothing deadlocks and the loss equals the one-rank value. Two gloo ranks with expert
parallelism here; ZeRO-3 through the launcher in test_moe_training.py."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
import torch

from models.config import ModelConfig
from models.gpt import GPT
from models.moe.block import MoEFeedForward
from models.moe.dispatch import AllToAllDispatcher
from tests.unit.evals.test_distributed import SEQ, TOKENS, heldout  # noqa: F401 (shared with the unit tests)

CFG = dict(
    d_model=32,
    n_layers=2,
    n_heads=2,
    vocab_size=64,
    seq_len=SEQ,
    moe={"num_experts": 4, "top_k": 2, "d_ff": 32, "router": "softmax_topk"},
)


def model() -> GPT:
    torch.manual_seed(0)
    return GPT(ModelConfig(**CFG))


def _worker(rank: int, port: int, out: dict) -> None:
    import torch.distributed as dist

    # A short timeout turns a deadlock into an error instead of a hung test.
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(seconds=60)
    )
    torch.set_num_threads(1)
    try:
        m = model()
        for block in (b for b in m.modules() if isinstance(b, MoEFeedForward)):  # experts 2+2 over the ranks
            for name in ("gate_proj", "up_proj", "down_proj"):
                p = getattr(block.experts, name)
                p.data = p.data[2 * rank : 2 * rank + 2].clone()
            block.experts.num_experts, block.dispatcher = 2, AllToAllDispatcher(4, dist.group.WORLD)
        out[rank] = heldout().run(m, torch.device("cpu"), rank, 2)
    finally:
        dist.destroy_process_group()


def test_expert_parallel_eval_with_uneven_windows_matches_one_rank():
    import torch.multiprocessing as mp

    one = heldout().run(model(), torch.device("cpu"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = mp.Manager().dict()
    mp.spawn(_worker, args=(port, out), nprocs=2, join=True)
    for rank in (0, 1):
        assert out[rank]["val_loss"] == pytest.approx(one["val_loss"], rel=1e-6)
        assert out[rank]["val_bpb"] == pytest.approx(one["val_bpb"], rel=1e-6)
