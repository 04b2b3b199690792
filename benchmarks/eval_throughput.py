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
            mine = [i for i in task.instances if i.request_type == "loglikelihood"]
            for i in mine:
                i.metadata = (name, *i.metadata[1:]) if i.metadata else (name,)
            instances += mine
    finally:
        p.cleanup()
    return instances


def timed(lm, reqs):
    t0 = time.perf_counter()
    out = lm.loglikelihood(reqs, disable_tqdm=True)
    return out, time.perf_counter() - t0


def compare(ours_lm, hf_lm, reqs, repeats: int):
    """Alternate the two clients `repeats` times; the fastest run of each counts (a shared,
    noisy machine only ever makes a run slower)."""
    ours_lm.loglikelihood(reqs[:8], disable_tqdm=True)  # warm-up
    hf_lm.loglikelihood(reqs[:8], disable_tqdm=True)
    t_ours, t_hf = [], []
    for _ in range(repeats):
        ours, t = timed(ours_lm, reqs)
        t_ours.append(t)
        ref, t = timed(hf_lm, reqs)
        t_hf.append(t)
    return ours, ref, t_ours, t_hf


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="run directory or checkpoints/step_N")
    ap.add_argument("--tasks", default=DEFAULT_TASKS)
    ap.add_argument("--limit", type=int, default=100, help="documents per task")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None, help="torch threads for both (default: torch's)")
    ap.add_argument("--repeats", type=int, default=3, help="alternating timed runs per client (best counts)")
    ap.add_argument("--per-task", action="store_true", help="also time each task separately")
    args = ap.parse_args(argv)

    import torch
    from lm_eval.models.huggingface import HFLM

    from evals.adapter import ScalelabLM
    from evals.export import export_checkpoint

    import logging

    logging.getLogger("lm_eval").setLevel(logging.ERROR)  # hf's per-request truncation warnings cost I/O time
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
        ours, ref, ts_ours, ts_hf = compare(ours_lm, hf_lm, reqs, args.repeats)
        t_ours, t_hf = min(ts_ours), min(ts_hf)
    diff = max(abs(a[0] - b[0]) for a, b in zip(ours, ref))
    greedy_same = sum(a[1] == b[1] for a, b in zip(ours, ref))
    n = len(reqs)
    cfg = ours_lm.loaded.model_config
    print(f"checkpoint: {ours_lm.loaded.checkpoint} (d_model={cfg.d_model}, n_layers={cfg.n_layers}, "
          f"vocab={cfg.vocab_size}, seq_len={cfg.seq_len})")
    print(f"tasks: {args.tasks} (limit {args.limit}): {n} loglikelihood requests, batch size {args.batch_size}, "
          f"torch threads {torch.get_num_threads()}"
          + (f" ({dropped} with continuations longer than the context window left out)" if dropped else ""))
    runs = lambda ts: ", ".join(f"{t:.2f}" for t in ts)  # noqa: E731
    print(f"scalelab adapter : {n / t_ours:9.1f} requests/s (best of {args.repeats}: {t_ours:.2f} s; runs {runs(ts_ours)} s)")
    print(f"lm-eval hf       : {n / t_hf:9.1f} requests/s (best of {args.repeats}: {t_hf:.2f} s; runs {runs(ts_hf)} s)")
    print(f"speed-up         : {t_hf / t_ours:.2f}x best-vs-best, {sorted(ts_hf)[len(ts_hf) // 2] / sorted(ts_ours)[len(ts_ours) // 2]:.2f}x "
          f"median-vs-median (target >= 1.5x)")
    print(f"max |logprob diff| {diff:.2e}; is_greedy equal on {greedy_same}/{n}")
    if args.per_task:
        print("per task (separate timed runs):")
        by_task: dict[str, list] = {}
        for r in reqs:
            by_task.setdefault(r.metadata[0], []).append(r)
        for name, rs in by_task.items():
            _, _, ta, tb = compare(ours_lm, hf_lm, rs, args.repeats)
            a, b = min(ta), min(tb)
            print(f"  {name:40s} {len(rs):5d} req  ours {len(rs) / a:8.1f}/s  hf {len(rs) / b:8.1f}/s  {b / a:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
