"""Process-group set-up: the same code path for one CPU process, the `deepspeed` launcher and
multi-node GPU jobs (the launcher or Slurm exports RANK/WORLD_SIZE/LOCAL_RANK/MASTER_*)."""

from __future__ import annotations

import atexit
import os
import sys
from dataclasses import dataclass
from typing import NoReturn

import torch

from base.ports import free_port
from pretrain.engine.extensions import configure


@dataclass
class DistInfo:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


_group_world = 0  # world size of the process group this process set up (0: none)


def env_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def cores_per_rank(local_world: int) -> int:
    """The CPUs this process may run on (its affinity mask, e.g. a Slurm allocation), split between
    the local ranks. A property of the allocation, never of the machine's current load."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // local_world)


def setup(threads: int | None, deterministic: bool = True) -> DistInfo:
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
        # Oversubscribed CPU ranks run many times slower: split the cores between local ranks.
        torch.set_num_threads(threads or cores_per_rank(local_world))
    if deterministic:
        from pretrain.engine.determinism import make_deterministic  # deferred: imports torch

        make_deterministic(device)

    configure()  # no JIT build of DeepSpeed's CPU comm op, and no endless wait on a build lock
    import deepspeed  # deferred: imports deepspeed

    deepspeed.init_distributed(dist_backend="nccl" if device.type == "cuda" else "gloo", verbose=False)
    global _group_world
    _group_world = world
    return DistInfo(rank, world, local_rank, local_world, device)


def teardown(info: DistInfo, clean: bool) -> None:
    """Destroy the process group before the interpreter exits. Left to interpreter shutdown, a rank
    can tear gloo down while rank 0 (which hosts the store) is already gone and abort with "terminate
    called without an active exception" after a run that finished. After a clean run the ranks meet
    first; after a failure they don't (a peer may be gone, and waiting for it would hang)."""
    import torch.distributed as dist  # deferred: imports torch

    if not dist.is_initialized():
        return
    if clean and info.world_size > 1:
        dist.barrier()
    import deepspeed.comm  # deferred: imports deepspeed

    # DeepSpeed's own call also drops the groups it caches (data/expert parallel), so a second
    # run in the same process (a notebook, the test suite) builds them afresh.
    deepspeed.comm.destroy_process_group()


def exit_process(rc: int) -> NoReturn:
    """End the process with `rc`. A rank of a multi-rank group runs the Python exit hooks (W&B's
    teardown, logging's flush) and then skips interpreter finalisation: even after `teardown`, gloo
    can abort there (SIGABRT, "terminate called without an active exception", no Python frame; about
    1 run in 20 of a 2-rank ZeRO-3 job on CPU), and the launcher then reports a finished run as
    failed. The trainer's files are flushed line by line and closed by now."""
    if _group_world > 1:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(rc)
    sys.exit(rc)


def barrier(info: DistInfo) -> None:
    import torch.distributed as dist  # deferred: imports torch

    if info.world_size > 1 and dist.is_initialized():
        dist.barrier()


def all_reduce_max(value: float, info: DistInfo) -> float:
    import torch.distributed as dist  # deferred: imports torch

    if info.world_size == 1 or not dist.is_initialized():
        return value
    t = torch.tensor([value], dtype=torch.float64, device=info.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def all_reduce_mean(value: float, info: DistInfo) -> float:
    import torch.distributed as dist  # deferred: imports torch

    if info.world_size == 1 or not dist.is_initialized():
        return value
    t = torch.tensor([value], dtype=torch.float64, device=info.device)
    dist.all_reduce(t)
    return t.item() / info.world_size
