"""Expert parallelism applied to a built model (single process parts; the 2-rank launcher run is
in test_moe_training.py)."""

from __future__ import annotations

import pytest
import torch

from pretrain.engine.expert_parallel import prepare_moe
from tests.unit.pretrain.test_moe_expert_parallel import make_block  # shared with the unit tests


def _ep_worker(rank: int, port: int, bias: list[float], out: dict) -> None:
    import os

    import deepspeed
    import torch.distributed as dist
    from deepspeed.moe.layer import MoE

    from rundir.weights import restack_experts

    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    from pretrain.engine.extensions import configure

    configure()  # as the trainer does: else DeepSpeed JIT-builds its CPU comm op here (~150 s when not cached)
    deepspeed.init_distributed(dist_backend="gloo", verbose=False)
    torch.set_num_threads(1)
    try:
        kw = dict(router="aux_free_bias", capacity_factor=1.0, num_shared_experts=1, ep_size=2)
        full = make_block(**kw)
        full.router.score_bias.copy_(torch.tensor(bias))
        ep = make_block(**kw)
        ep.load_state_dict(full.state_dict())
        groups = [
            {"params": [p for n, p in ep.named_parameters() if p.dim() >= 2], "weight_decay": 0.1, "name": "decay"},
            {"params": [p for n, p in ep.named_parameters() if p.dim() < 2], "weight_decay": 0.0, "name": "no_decay"},
        ]
        groups = prepare_moe(ep, ep.moe_cfg, 2, groups)
        checks = {}
        local = ep.experts.local
        checks["deepspeed layer"] = isinstance(ep.experts, MoE) and type(ep.dispatcher).__name__ == "AllToAllDispatcher"
        checks["slice"] = torch.equal(local.up_proj, full.experts.up_proj[2 * rank : 2 * rank + 2])
        checks["marked"] = all(p.allreduce is False and p.group_name == "ep_size_2" for p in local.parameters())
        moe_groups = [g for g in groups if g.get("moe")]
        grouped = [p for g in groups for p in g["params"]]
        checks["param groups"] = (
            len(grouped) == len(list(ep.parameters()))
            and {id(p) for p in grouped} == {id(p) for p in ep.parameters()}
            and {id(p) for g in moe_groups for p in g["params"]} == {id(p) for p in local.parameters()}
            and all(g["name"] == "ep_size_2" for g in moe_groups)
        )
        ep.experts.set_deepspeed_parallelism()  # what the engine calls: DeepSpeed's groups, checked against ours
        checks["deepspeed groups"] = dist.get_process_group_ranks(ep.experts.deepspeed_moe.ep_group) == [0, 1]
        sd = ep.state_dict()
        checks["keys"] = sorted(k for k in sd if "expert" in k) == [
            f"experts.deepspeed_moe.experts.deepspeed_experts.0.{w}" for w in ("down_proj", "gate_proj", "up_proj")
        ] and not [k for k in sd if "gate.wg" in k]
        # DeepSpeed's checkpoint renames local expert 0 to the global id (the EP rank): both ranks'
        # files together restack into the unsharded weights.
        mine = {
            k.replace("deepspeed_experts.0.", f"deepspeed_experts.{rank}."): v for k, v in sd.items() if "expert" in k
        }
        both = [None, None]
        dist.all_gather_object(both, mine)
        stacked = restack_experts({**both[0], **both[1]})
        checks["restack"] = all(
            torch.equal(stacked[f"experts.{w}"], getattr(full.experts, w))
            for w in ("gate_proj", "up_proj", "down_proj")
        )

        x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(rank))
        xs = [x.clone().requires_grad_(True) for _ in range(2)]
        y_full, _ = full(xs[0])
        y_ep, _ = ep(xs[1])
        g = torch.randn_like(y_full)
        (y_full * g).sum().backward()
        (y_ep * g).sum().backward()
        # Expert grads on the owner = sum over both ranks' tokens; compare after summing full-model grads.
        full_grad = full.experts.down_proj.grad.clone()
        dist.all_reduce(full_grad)
        checks["forward/backward"] = (
            torch.allclose(y_full, y_ep, atol=1e-6)
            and torch.allclose(xs[0].grad, xs[1].grad, atol=1e-6)
            and torch.allclose(full_grad[2 * rank : 2 * rank + 2], local.down_proj.grad, atol=1e-6)
        )
        out[rank] = checks
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("bias", [[0.0, 0.0, 0.0, 0.0], [10.0, 10.0, 0.0, 0.0]], ids=["balanced", "rank1-gets-nothing"])
def test_expert_parallel_matches_local_with_deepspeed_layout(bias):
    """Two gloo ranks, experts split 2+2 by prepare_moe: DeepSpeed's MoE layer holds each rank's
    slice (marked for the expert-data-parallel reduction, in MoE optimizer groups, saved under
    DeepSpeed's expert keys), and outputs, input grads and expert grads equal the unsharded layer."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = mp.Manager().dict()
    mp.spawn(_ep_worker, args=(port, bias, out), nprocs=2, join=True)
    for rank in (0, 1):
        assert out[rank] == {k: True for k in out[rank]} and len(out[rank]) == 8, (rank, out[rank])
