"""Loglikelihood requests/s: scalelab's lm-eval adapter vs lm-eval's `hf` model.

Both score the same lm-eval Instances (built by lm-eval from the same local tasks and limit) on
the same weights: ours from the run's checkpoint, `hf` from its `scalelab export hf` copy, same
batch size, same threads, fp32. One timed run each (after a one-batch warm-up), then the largest
log-prob difference between the two as a correctness check. Target: ours >= 1.5x on CPU.

    python benchmarks/eval_throughput.py RUN_OR_CKPT [--tasks a,b] [--limit 100] [--batch-size 32]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

DEFAULT_TASKS = "blimp_anaphor_number_agreement,blimp_determiner_noun_agreement_1,lambada_openai,piqa,arc_easy,hellaswag"


def build_requests(tasks: list[str], limit: int):
    from lm_eval.tasks import get_task_dict

    from evals.tasks import plan

    p = plan(tasks)
    try:
        task_dict = get_task_dict(tasks, p.task_manager())
        instances = []
        for name, task in task_dict.items():
            task.build_all_requests(limit=limit, rank=0, world_size=1)
            instances += [i for i in task.instances if i.request_type == "loglikelihood"]
    finally:
        p.cleanup()
    return instances


def timed(lm, reqs):
    lm.loglikelihood(reqs[:8], disable_tqdm=True)  # warm-up
    t0 = time.perf_counter()
    out = lm.loglikelihood(reqs, disable_tqdm=True)
    return out, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="run directory or checkpoints/step_N")
    ap.add_argument("--tasks", default=DEFAULT_TASKS)
    ap.add_argument("--limit", type=int, default=100, help="documents per task")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None, help="torch threads for both (default: torch's)")
    args = ap.parse_args(argv)

    import torch
    from lm_eval.models.huggingface import HFLM

    from evals.adapter import ScalelabLM
    from models.hf_export import export_checkpoint

    if args.threads:
        torch.set_num_threads(args.threads)
    reqs = build_requests([t for t in args.tasks.split(",") if t], args.limit)
    with tempfile.TemporaryDirectory() as tmp:
        export_checkpoint(args.path, tmp)
        ours_lm = ScalelabLM(path=args.path, device="cpu", batch_size=args.batch_size)
        # lm-eval's hf model asserts continuation <= max_length: keep requests both can score
        dropped = len(reqs)
        reqs = [r for r in reqs if not r.args[0] or len(ours_lm._encode_pair(*r.args)[1]) <= ours_lm.max_length]
        dropped -= len(reqs)
        hf_lm = HFLM(pretrained=tmp, device="cpu", batch_size=args.batch_size, dtype="float32")
        ours, t_ours = timed(ours_lm, reqs)
        ref, t_hf = timed(hf_lm, reqs)
    diff = max(abs(a[0] - b[0]) for a, b in zip(ours, ref))
    greedy_same = sum(a[1] == b[1] for a, b in zip(ours, ref))
    n = len(reqs)
    cfg = ours_lm.loaded.config.model
    print(f"checkpoint: {ours_lm.loaded.checkpoint} (d_model={cfg.d_model}, n_layers={cfg.n_layers}, "
          f"vocab={cfg.vocab_size}, seq_len={cfg.seq_len})")
    print(f"tasks: {args.tasks} (limit {args.limit}): {n} loglikelihood requests, batch size {args.batch_size}, "
          f"torch threads {torch.get_num_threads()}"
          + (f" ({dropped} with continuations longer than the context window left out)" if dropped else ""))
    print(f"scalelab adapter : {n / t_ours:9.1f} requests/s ({t_ours:.2f} s)")
    print(f"lm-eval hf       : {n / t_hf:9.1f} requests/s ({t_hf:.2f} s)")
    print(f"speed-up         : {t_hf / t_ours:.2f}x (target >= 1.5x)")
    print(f"max |logprob diff| {diff:.2e}; is_greedy equal on {greedy_same}/{n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
