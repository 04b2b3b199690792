"""Process-group set-up: the same code path for one CPU process, the `deepspeed` launcher and
multi-node GPU jobs (the launcher or Slurm exports RANK/WORLD_SIZE/LOCAL_RANK/MASTER_*)."""

from __future__ import annotations

import atexit
import os
import socket
import sys
from dataclasses import dataclass
from datetime import timedelta
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
    ranks: list | None = None  # where every rank runs (`rank_map`), once gathered

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # the collectives callbacks use, on the object they are given (they import nothing from the engine)
    def barrier(self) -> None:
        barrier(self)

    def all_reduce_max(self, value: float) -> float:
        return all_reduce_max(value, self)


_group_world = 0  # world size of the process group this process set up (0: none)


def env_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def cores_per_rank(local_world: int) -> int:
    """The CPUs this process may run on (its affinity mask, e.g. a Slurm allocation), split between
    the local ranks. A property of the allocation, never of the machine's current load."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // local_world)


def env_local_world_size(world: int) -> int:
    """Ranks on this node: torchrun and our srun shim set LOCAL_WORLD_SIZE, the DeepSpeed launcher
    LOCAL_SIZE; neither (one process, or a launcher that sets neither): all ranks are local."""
    for key in ("LOCAL_WORLD_SIZE", "LOCAL_SIZE"):
        if os.environ.get(key):
            return int(os.environ[key])
    return world


def setup(threads: int | None, deterministic: bool = True, timeout_s: float | None = None) -> DistInfo:
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    local_world = env_local_world_size(world)
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

    kw = {"timeout": timedelta(seconds=timeout_s)} if timeout_s else {}  # else torch's default (30 min)
    deepspeed.init_distributed(dist_backend="nccl" if device.type == "cuda" else "gloo", verbose=False, **kw)
    global _group_world
    _group_world = world
    return DistInfo(rank, world, local_rank, local_world, device)


def apply_timeout(timeout_s: float | None) -> int:
    """`train.dist_timeout_s` on every process group of this rank, the ones DeepSpeed made included
    (data-parallel, expert-parallel, ...): torch gives a group made by `new_group` the backend's
    default (30 min), not the world group's timeout. Call once the engine is built. Returns how
    many groups were set."""
    if not timeout_s:
        return 0
    import torch.distributed as dist  # deferred: imports torch
    from torch.distributed import distributed_c10d as c10d  # deferred: imports torch

    if not dist.is_initialized():
        return 0
    n = 0
    for group in list(c10d._world.pg_map):
        try:
            c10d._set_pg_timeout(timedelta(seconds=timeout_s), group)
            n += 1
        except (ValueError, RuntimeError, AssertionError):  # a group this backend cannot re-time
            continue
    return n


def rank_map(info: DistInfo) -> list[dict]:
    """Where each rank runs, gathered from all ranks (a collective: every rank calls it): global and
    local rank, host name and the address it resolves to (what gloo binds), pid, threads, CPUs."""
    import torch.distributed as dist  # deferred: imports torch

    host = socket.gethostname()
    try:
        addr = socket.gethostbyname(host)
    except OSError:
        addr = None
    me = {
        "rank": info.rank,
        "local_rank": info.local_rank,
        "local_world_size": info.local_world_size,
        "host": host,
        "addr": addr,
        "pid": os.getpid(),
        "threads": torch.get_num_threads(),
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    }
    if info.world_size == 1 or not dist.is_initialized():
        info.ranks = [me]
        return info.ranks
    out: list = [None] * info.world_size
    dist.all_gather_object(out, me)
    info.ranks = out
    return out


def name_peers(text: str, info: DistInfo) -> str:
    """A failed collective names its peer by address (gloo: "Read error [10.0.0.2]:port"): add which
    ranks and host that is, in front, so a lost node is named where the failure is recorded."""
    by_addr: dict[str, list] = {}
    for r in info.ranks or []:
        if r.get("addr") and r["rank"] != info.rank:
            by_addr.setdefault(r["addr"], []).append(r)
    found = [
        f"rank{'s' if len(rs) > 1 else ''} {', '.join(str(r['rank']) for r in rs)} on {rs[0]['host']} ({addr})"
        for addr, rs in by_addr.items()
        if f"[{addr}]" in text
    ]
    return f"lost peer {'; '.join(found)}: {text}" if found else text  # first: `sweep status` shows one line


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
