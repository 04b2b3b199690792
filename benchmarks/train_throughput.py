"""Trainer overhead: scalelab's DeepSpeed trainer (ZeRO-1) vs a plain PyTorch loop, one process.

Same model (d_model 256, 4 layers, seq 256, micro-batch 16, vocab 4096, fp32, AdamW, clipping),
same batches. The plain loop is timed before and after the trainer and averaged, because this
machine's speed drifts with other load. Targets: ratio >= 0.95 and MFU >= 25% of the measured
fp32 matmul peak.

    .venv/bin/python benchmarks/train_throughput.py [--steps 30] [--log-every 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models.accounting import model_counts
from models.gpt import GPT
from pretrain.callbacks.speed_monitor import measure_cpu_peak
from pretrain.config.loader import validate_train
from pretrain.engine.distributed import setup
from pretrain.engine.trainer import Trainer
from pretrain.feed.sampler import WindowSampler
from pretrain.optim.adamw import param_groups
from rundir.schedules import lr_at


class RandomTokens:
    """Stands in for a prepared data set: the same token stream for both loops."""

    def __init__(self, vocab: int, n: int = 2_000_000):
        rng = np.random.default_rng(0)
        self.vocab_size, self.eot_id = vocab, 0
        self._train = rng.integers(0, vocab, n, dtype=np.uint16)
        self._val = rng.integers(0, vocab, 100_000, dtype=np.uint16)

    def split_tokens(self, split):
        return self._train if split == "train" else self._val

    def bytes_per_token(self, split):
        return 3.2


def make_config(steps: int, log_every: int):
    return validate_train(
        {
            "name": "bench",
            "model": {"d_model": 256, "n_layers": 4, "n_heads": 4, "vocab_size": 4096, "seq_len": 256},
            "data": {"sources": ["unused"]},
            "optim": {"lr": 1e-3, "weight_decay": 0.1, "grad_clip": 1.0},
            "schedule": {"name": "cosine", "warmup_steps": 5},
            "train": {
                "steps": steps,
                "micro_batch_size": 16,
                "global_batch_size": 16,
                "log_every_steps": log_every,
                "eval_every_steps": 0,
                "eval_tokens": 256,
                "checkpoint_every_steps": 0,
            },
            "deepspeed": {"zero_stage": 1},
            "precision": "fp32",
            "wandb": {"mode": "disabled"},
        }
    )


def plain_loop(cfg, data, warmup: int, measured: int) -> float:
    torch.manual_seed(cfg.train.seed)
    model = GPT(cfg.model)
    opt = torch.optim.AdamW(
        param_groups(model, cfg.optim), lr=cfg.optim.lr, betas=(cfg.optim.beta1, cfg.optim.beta2), eps=cfg.optim.eps
    )
    sampler = WindowSampler(data.split_tokens("train"), cfg.model.seq_len, cfg.train.seed)
    bs, total = cfg.train.micro_batch_size, warmup + measured
    for step in range(total):
        if step == warmup:
            t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total, cfg.optim.lr, cfg.schedule)
        x, y = sampler.batch(step * bs, bs)
        loss = model(x, targets=y, logits=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
    return measured * bs * cfg.model.seq_len / (time.perf_counter() - t0)


def scalelab_trainer(cfg, data, dist, log_every: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp), dist, data, progress=False, messages=False)
        trainer.build()
        trainer.train()
        recs = [json.loads(line) for line in (Path(tmp) / "metrics.jsonl").read_text().splitlines()]
    windows = [r["tokens_per_s"] for r in recs[1:] if r["step"] % log_every == 0]  # first window = warm-up
    return float(np.mean(windows))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30, help="trainer steps (the first log window is warm-up)")
    ap.add_argument("--log-every", type=int, default=10)
    args = ap.parse_args()
    dist = setup(threads=None)
    cfg = make_config(args.steps, args.log_every)
    data = RandomTokens(4096)
    measured = args.steps - args.log_every
    peak = measure_cpu_peak()
    plain_a = plain_loop(cfg, data, args.log_every, measured)
    ours = scalelab_trainer(cfg, data, dist, args.log_every)
    plain_b = plain_loop(cfg, data, args.log_every, measured)
    peak = max(peak, measure_cpu_peak())
    plain = (plain_a + plain_b) / 2
    fpt = model_counts(cfg.model).flops_per_token
    print(
        f"threads: {torch.get_num_threads()}  model: {model_counts(cfg.model).total:,} params, "
        f"{fpt / 1e6:.1f} MFLOP/token"
    )
    print(f"measured fp32 matmul peak: {peak / 1e9:.1f} GFLOP/s")
    print(
        f"plain PyTorch loop:        {plain:8.0f} tokens/s  (before "
        f"{plain_a:.0f}, after {plain_b:.0f})  MFU {fpt * plain / peak:.1%}"
    )
    print(f"scalelab trainer (ZeRO-1): {ours:8.0f} tokens/s  MFU {fpt * ours / peak:.1%}")
    print(f"ratio scalelab / plain:    {ours / plain:.3f}  (target >= 0.95)")


if __name__ == "__main__":
    main()
