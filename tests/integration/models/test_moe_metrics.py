"""Router health metrics: key names, values and the console line."""

from __future__ import annotations

import pytest
import torch

from tests.unit.models.test_moe_metrics import _stats  # shared with the unit tests


def _rank_worker(rank: int, port: int, out_dir: str) -> None:
    import json
    import os

    import torch.distributed as dist

    from pretrain.callbacks.moe import step_metrics

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        mine = (
            [[_stats([3, 1], 2, 1, 4, 0.5, 1.0)], [_stats([1, 3], 2, 0, 4, 0.7, 3.0)]]
            if rank == 0
            else [[_stats([4, 0], 2, 2, 4, 0.1, 2.0)], [_stats([2, 2], 6, 1, 4, 0.9, 2.0)]]
        )
        m = step_metrics(mine, world_size=2)
        with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
            json.dump(m, f)
    finally:
        dist.destroy_process_group()


def test_router_metrics_all_reduced_over_two_gloo_ranks(tmp_path):
    """The trainer's MoE callback sums the ranks' totals with one all-reduce: both ranks log the
    metrics of the whole step (as computed from all four micro-batches)."""
    import json
    import socket

    import torch.multiprocessing as mp

    from models.moe.metrics import merge, summarize_totals, totals

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_rank_worker, args=(port, str(tmp_path)), nprocs=2, join=True)
    got = [json.loads((tmp_path / f"{r}.json").read_text()) for r in (0, 1)]
    want = summarize_totals(
        merge(
            totals([[_stats([3, 1], 2, 1, 4, 0.5, 1.0)], [_stats([1, 3], 2, 0, 4, 0.7, 3.0)]]),
            totals([[_stats([4, 0], 2, 2, 4, 0.1, 2.0)], [_stats([2, 2], 6, 1, 4, 0.9, 2.0)]]),
        )
    )
    assert got[0] == got[1]
    assert got[0] == pytest.approx(want)
    assert got[0]["moe/layer1/imbalance"] == pytest.approx(1.25)
