"""Expert parallelism applied to a built model (single process parts; the 2-rank launcher run is
in test_moe_training.py)."""
from __future__ import annotations

import pytest
import torch

from models.moe.block import MoEFeedForward
from models.moe.config import MoEConfig
from pretrain.errors import ConfigError
from pretrain.expert_parallel import prepare_moe


def make_block(**kw) -> MoEFeedForward:
    torch.manual_seed(0)
    return MoEFeedForward(16, MoEConfig(**{"num_experts": 4, "top_k": 2, **kw}), d_ff=24)


def test_single_rank_or_ep1_leaves_model_and_groups_alone():
    block = make_block(ep_size=2)
    groups = [{"params": list(block.parameters()), "weight_decay": 0.1}]
    with pytest.warns(UserWarning, match="single rank"):
        assert prepare_moe(block, block.moe_cfg, 1, groups) is groups
    block = make_block()
    assert prepare_moe(block, block.moe_cfg, 4, groups) is groups
    assert block.experts.up_proj.shape[0] == 4 and not hasattr(block.experts.up_proj, "allreduce")


def test_ep_size_must_divide_world_size():
    block = make_block(ep_size=4)
    with pytest.raises(ConfigError, match="ep_size=4 must divide the number of ranks"):
        prepare_moe(block, block.moe_cfg, 6, [])


def test_expert_parallel_sharding_and_deepspeed_key_layout():
    """Single process: shard as rank 1 of 2, check the slice and the checkpoint key round trip."""
    pytest.importorskip("deepspeed")
    from pretrain.expert_parallel import shard_experts

    block = make_block(router="aux_free_bias")
    full = block.experts.up_proj.detach().clone()
    shard_experts(block, ep_size=2, ep_rank=1, ep_group=None, group_name="ep_size_2")
    assert torch.equal(block.experts.up_proj, full[2:4])
    assert block.experts.up_proj.allreduce is False and block.experts.up_proj.group_name == "ep_size_2"
    from deepspeed.moe.layer import MoE

    assert isinstance(block, MoE) and block.num_local_experts == 2
    sd = {k: v.clone() for k, v in block.state_dict().items()}
    assert "deepspeed_moe.experts.deepspeed_experts.1.up_proj" in sd and "experts.up_proj" not in sd
    assert not [k for k in sd if "expert" in k and "deepspeed_experts" not in k]  # DeepSpeed's rule
    with torch.no_grad():
        block.experts.up_proj.zero_()
    block.load_state_dict(sd)
    assert torch.equal(block.experts.up_proj, full[2:4])


def _ep_worker(rank: int, port: int, bias: list[float], out: dict) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.set_num_threads(1)
    try:
        full = make_block(router="aux_free_bias", capacity_factor=1.0, num_shared_experts=1)
        full.router.score_bias.copy_(torch.tensor(bias))
        ep = make_block(router="aux_free_bias", capacity_factor=1.0, num_shared_experts=1)
        ep.load_state_dict(full.state_dict())
        for name in ("gate_proj", "up_proj", "down_proj"):  # what shard_experts does, minus DeepSpeed
            p = getattr(ep.experts, name)
            p.data = p.data[2 * rank: 2 * rank + 2].clone()
        ep.experts.num_experts, ep.ep_group, ep.ep_size = 2, dist.group.WORLD, 2
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
        ok = (torch.allclose(y_full, y_ep, atol=1e-6) and torch.allclose(xs[0].grad, xs[1].grad, atol=1e-6)
              and torch.allclose(full_grad[2 * rank: 2 * rank + 2], ep.experts.down_proj.grad, atol=1e-6))
        out[rank] = ok
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("bias", [[0.0, 0.0, 0.0, 0.0], [10.0, 10.0, 0.0, 0.0]], ids=["balanced", "rank1-gets-nothing"])
def test_all_to_all_dispatch_matches_local(bias):
    """Two gloo ranks, experts split 2+2: outputs, input grads and expert grads equal the unsharded layer."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = mp.Manager().dict()
    mp.spawn(_ep_worker, args=(port, bias, out), nprocs=2, join=True)
    assert dict(out) == {0: True, 1: True}
