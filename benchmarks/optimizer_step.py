"""Optimizer step time per parameter: AdamW and Muon (optim.name), 1 and 2 ranks, balanced vs flat.

    python benchmarks/optimizer_step.py [--d-model 256] [--layers 3] [--rounds 5]

One GPT (vocab 4096, seq 256; Muon on 3/4 of its parameters: the blocks' matrices) with fixed random
gradients; each variant steps its optimizer `rounds` times, interleaved with the others (the machine
is shared and noisy), and the median is reported as ns per parameter of the whole model. One thread
per rank. Variants:
  1 rank:  torch AdamW (foreach, as the trainer builds it); MuonAdamW (pretrain/optim/muon.py) replicated.
  2 ranks (gloo, torch.multiprocessing): ZeRO-0 replicated (every rank updates everything), and the
           whole-tensor ZeRO-1 sharding with `balanced` (greedy largest-first by Newton-Schulz FLOPs)
           and `flat` (ZeRO's contiguous equal chunks; a matrix cut by the boundary is orthogonalised by
           both ranks) assignment, broadcast of the updated tensors included; a step's time is the
           slowest rank's. AdamW on 2 ranks: the same optimizer with every tensor in AdamW groups.
Also printed: each assignment's Newton-Schulz load on the busiest rank over the mean (1.00 = even).
Ratios are against torch AdamW on 1 rank, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from base.ports import free_port
from models.config import ModelConfig
from models.gpt import GPT
from pretrain.config.schema import OptimConfig
from pretrain.optim.adamw import param_groups
from pretrain.optim.muon import MuonAdamW
from pretrain.optim.muon_build import muon_param_groups
from pretrain.optim.muon_ranks import assign, ns_flops


def build(args, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    cfg = ModelConfig(d_model=args.d_model, n_layers=args.layers, n_heads=4, n_kv_heads=4, vocab_size=4096, seq_len=256)
    model = GPT(cfg)
    g = torch.Generator().manual_seed(1)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=g) * 1e-3
    return model


def make(kind: str, model: GPT, rank: int = 0, world: int = 1, mode: str = "replicated"):
    cfg = OptimConfig(name="muon")
    if kind == "torch_adamw":
        return torch.optim.AdamW(param_groups(model, cfg), lr=1e-3, betas=(0.9, 0.95), foreach=True)
    groups = muon_param_groups(model, cfg)
    if kind == "adamw":  # every tensor under AdamW, sharded like Muon's
        groups = [{**g, "use_muon": False} for g in groups]
    return MuonAdamW(groups, lr=1e-3, mode=mode, rank=rank, world_size=world)


def timed_step(opt) -> float:
    if dist.is_initialized():
        dist.barrier()
    t0 = time.perf_counter()
    opt.step()
    dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    if dist.is_initialized():
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)  # the step ends when its slowest rank does
    return float(dt)


def run_variants(variants: dict, rounds: int) -> dict[str, float]:
    for opt in variants.values():  # warm-up: state allocated, first-call costs paid
        timed_step(opt)
    times = {k: [] for k in variants}
    for _ in range(rounds):
        for k, opt in variants.items():
            times[k].append(timed_step(opt))
    return {k: statistics.median(v) for k, v in times.items()}


def two_rank_worker(rank: int, port: int, args, out) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    variants = {}
    for kind in ("adamw", "muon"):
        for mode in ("replicated", "balanced", "flat"):
            variants[f"{kind} 2 ranks {mode}"] = make(kind, build(args), rank, 2, mode)
    res = run_variants(variants, args.rounds)
    if rank == 0:
        out.update(res)
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = build(args)
    n = sum(p.numel() for p in model.parameters())
    groups = muon_param_groups(model, OptimConfig(name="muon"))
    muon = [p for g in groups if g["use_muon"] for p in g["params"]]
    print(
        f"model: d_model {args.d_model}, {args.layers} layers, vocab 4096: {n:,} params, "
        f"{sum(p.numel() for p in muon):,} under Muon ({len(muon)} matrices); load {os.getloadavg()[0]:.1f}"
    )
    shapes = [tuple(p.shape) for p in muon]
    costs = [ns_flops(s, 5) for s in shapes]
    for mode in ("balanced", "flat"):
        a = assign(mode, ["muon"] * len(shapes), shapes, 2)
        load = a.load(costs, 2)
        print(
            f"Newton-Schulz load, 2 ranks {mode:8s}: busiest rank / even share = {max(load) / (sum(costs) / 2):.2f} "
            f"({sum(len(w) > 1 for w in a.workers)} matrices done by both ranks)"
        )
    results = run_variants(
        {
            "adamw 1 rank torch": make("torch_adamw", build(args)),
            "adamw 1 rank ours": make("adamw", build(args)),
            "muon 1 rank": make("muon", build(args)),
        },
        args.rounds,
    )
    out = mp.Manager().dict()
    mp.spawn(two_rank_worker, args=(free_port(), args, out), nprocs=2, join=True)
    results.update(dict(out))
    ref = results["adamw 1 rank torch"]
    print(f"\n{'variant':28s} {'step ms':>9s} {'ns/param':>9s} {'vs torch AdamW 1 rank':>22s}")
    for k, v in results.items():
        print(f"{k:28s} {v * 1e3:9.1f} {v / n * 1e9:9.2f} {v / ref:21.2f}x")
    m1, bal, flat = results["muon 1 rank"], results["muon 2 ranks balanced"], results["muon 2 ranks flat"]
    print(
        f"\nmuon: 2 ranks balanced is {m1 / bal:.2f}x faster than 1 rank, {flat / bal:.2f}x faster than flat; "
        f"muon / adamw step time at 1 rank: {m1 / ref:.2f}x; load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
