"""Loglikelihood requests/s: scalelab's lm-eval adapter vs lm-eval's `hf` model, across model sizes.

Without arguments it sweeps a size ladder (about 0.1M, 1M, 10M and 100M non-embedding
parameters). Each size is a real scalelab run: trained for one step through `scalelab train`
(configs/train/tiny.yaml on the bundled corpus, its 4,096-token BPE, sequence length 256) into a
cache directory and exported with `scalelab export hf`; both are built once and reused.
For each size both clients score the same lm-eval Instances (built by lm-eval from the same local
tasks and limit) on the same weights, fp32, same batch size and torch threads. Timed runs
alternate (ours, hf, ours, hf, ...) because the machine is shared and noisy; the figure is the
median of the per-round speed-ups. The largest log-prob difference checks that the answers agree.
Target: ours >= 1.5x hf at every size.

    python benchmarks/eval_throughput.py                       # the ladder
    python benchmarks/eval_throughput.py --sizes 0.1M,1M       # part of it
    python benchmarks/eval_throughput.py RUN_OR_CKPT [--limit 100] [--tasks a,b] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

DEFAULT_TASKS = (
    "blimp_anaphor_number_agreement,blimp_determiner_noun_agreement_1,lambada_openai,piqa,arc_easy,hellaswag"
)
# name: (d_model, n_layers, n_heads, documents per task). The 100M model scores fewer documents so
# that the whole ladder stays within about ten minutes on two cores.
LADDER = {
    "0.1M": (64, 2, 4, 100),
    "1M": (128, 5, 4, 100),
    "10M": (320, 8, 5, 100),
    "100M": (768, 14, 12, 12),
}
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "scalelab" / "eval_throughput"


def cli(*args: str) -> None:
    """Run `scalelab ARGS` from the repository root, quietly; its output is shown if it fails."""
    proc = subprocess.run([sys.executable, "-m", "launch.cli", *args], cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"scalelab {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")


def ladder_checkpoint(name: str, cache: Path) -> tuple[Path, Path]:
    """(run directory, hf export) of one ladder size, trained and exported on first use."""
    d, layers, heads, _ = LADDER[name]
    run, hf = cache / f"d{d}-l{layers}", cache / f"d{d}-l{layers}-hf"
    if not (run / "checkpoints" / "latest").exists():
        print(f"building the {name} checkpoint: scalelab train -> {run}", flush=True)
        cli(
            "train",
            "--run-dir",
            str(run),
            "--no-progress",
            "configs/train/tiny.yaml",
            f"model.d_model={d}",
            f"model.n_layers={layers}",
            f"model.n_heads={heads}",
            "model.seq_len=256",
            "train.tokens=null",
            "train.steps=1",
            "train.micro_batch_size=1",
            "train.global_batch_size=1",
            "train.eval_every_steps=0",
            "train.eval_tokens=256",
            "train.checkpoint_every_steps=0",
            "wandb.mode=disabled",
        )
    if not (hf / "config.json").exists():
        cli("export", "hf", str(run), str(hf))
    return run, hf


def build_requests(tasks: list[str], limit: int):
    from lm_eval.tasks import get_task_dict

    from evals.tasks import resolve_tasks

    p = resolve_tasks(tasks)
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
    """Alternate the two clients `repeats` times after a warm-up; returns both answers and times."""
    ours_lm.loglikelihood(reqs[:8], disable_tqdm=True)
    hf_lm.loglikelihood(reqs[:8], disable_tqdm=True)
    t_ours, t_hf = [], []
    for _ in range(repeats):
        ours, t = timed(ours_lm, reqs)
        t_ours.append(t)
        ref, t = timed(hf_lm, reqs)
        t_hf.append(t)
    return ours, ref, t_ours, t_hf


def measure(label: str, run: Path, hf: Path, args, limit: int) -> dict:
    from lm_eval.models.huggingface import HFLM

    from evals.adapter import ScalelabLM
    from models.accounting import model_counts

    ours_lm = ScalelabLM(path=str(run), device="cpu", batch_size=args.batch_size)
    reqs = build_requests([t for t in args.tasks.split(",") if t], limit)
    # lm-eval's hf model asserts continuation <= max_length: keep requests both can score
    reqs = [r for r in reqs if not r.args[0] or len(ours_lm._encode_pair(*r.args)[1]) <= ours_lm.max_length]
    hf_lm = HFLM(pretrained=str(hf), device="cpu", batch_size=args.batch_size, dtype="float32")
    ours, ref, ts_ours, ts_hf = compare(ours_lm, hf_lm, reqs, args.repeats)
    cfg = ours_lm.loaded.model_config
    n = model_counts(cfg)
    return {
        "label": label,
        "checkpoint": str(ours_lm.loaded.checkpoint),
        "d_model": cfg.d_model,
        "n_layers": cfg.n_layers,
        "non_embedding": n.non_embedding,
        "total": n.total,
        "requests": len(reqs),
        "limit": limit,
        "ours_s": ts_ours,
        "hf_s": ts_hf,
        "ratio": statistics.median(h / o for o, h in zip(ts_ours, ts_hf)),
        "max_diff": max(abs(a[0] - b[0]) for a, b in zip(ours, ref)),
        "greedy_same": sum(a[1] == b[1] for a, b in zip(ours, ref)),
    }


def report(r: dict) -> None:
    n, med = r["requests"], statistics.median
    runs = lambda ts: ", ".join(f"{t:.2f}" for t in ts)  # noqa: E731
    print(
        f"{r['label']:>5s} {r['non_embedding'] / 1e6:7.2f}M "
        f"{r['total'] / 1e6:7.2f}M  d{r['d_model']}xL{r['n_layers']:<3d}"
        f"{n:6d}  {n / med(r['ours_s']):9.1f} {n / med(r['hf_s']):9.1f}  {r['ratio']:5.2f}x"
        f"  {r['max_diff']:.1e}  {r['greedy_same']}/{n}   ours {runs(r['ours_s'])} s | hf {runs(r['hf_s'])} s",
        flush=True,
    )


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", help="a run directory or checkpoints/step_N (default: the size ladder)")
    ap.add_argument("--sizes", default=",".join(LADDER), help=f"ladder sizes to run (of {', '.join(LADDER)})")
    ap.add_argument("--cache-dir", type=Path, default=CACHE, help="where the ladder's runs and exports are kept")
    ap.add_argument("--tasks", default=DEFAULT_TASKS)
    ap.add_argument("--limit", type=int, default=None, help="documents per task (default: the ladder's; 100 for PATH)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for both (default 1: on a shared machine more threads make timings erratic)",
    )
    ap.add_argument(
        "--repeats", type=int, default=3, help="alternating timed rounds per size (the median ratio counts)"
    )
    args = ap.parse_args(argv)

    import torch

    logging.getLogger("lm_eval").setLevel(logging.ERROR)  # hf's per-request truncation warnings cost I/O time
    torch.set_num_threads(args.threads)
    print(f"load before: {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        if args.path:
            cli("export", "hf", args.path, tmp)
            jobs = [("run", Path(args.path), Path(tmp), args.limit or 100)]
        else:
            sizes = [s for s in args.sizes.split(",") if s]
            if unknown := [s for s in sizes if s not in LADDER]:
                ap.error(f"--sizes: unknown {unknown}; choose from {', '.join(LADDER)}")
            jobs = [(s, *ladder_checkpoint(s, args.cache_dir), args.limit or LADDER[s][3]) for s in sizes]
        print(
            f"tasks: {args.tasks}; batch size {args.batch_size}, torch threads {torch.get_num_threads()}, fp32, "
            f"{args.repeats} alternating rounds (ours, hf) per size; requests/s are medians"
        )
        print(" size  non-emb   total  shape       reqs    ours/s      hf/s  ours/hf  max|dlp|  greedy=   times")
        results = []
        for label, run, hf, limit in jobs:
            results.append(measure(label, run, hf, args, limit))
            report(results[-1])
    print(f"load after: {load()}")
    missed = [r["label"] for r in results if r["ratio"] < 1.5]
    print("target >= 1.5x: " + ("met at every size" if not missed else f"missed at {', '.join(missed)}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
