"""Training throughput, MFU and peak memory of the real trainer on GPUs (ZeRO-1/2/3, bf16, seq 2048).

Each (model, ZeRO stage) is one `scalelab train` run (pretrain.cli; through the deepspeed launcher
for --gpus > 1), so it measures what users get. Figures are read back from the run's metrics.jsonl
and summary.json: tokens/s and MFU averaged over the log windows after the first (warm-up), MFU
against the detected device's peak at the precision used (rundir/accelerators.py via
pretrain/callbacks/speed_monitor.py),
peak memory the largest `mem/max_allocated_gb` (torch.cuda.max_memory_allocated) of the run, and
`time/comm_s` (DeepSpeed's collectives on a log step). A run that fails (e.g. out of memory) is
reported as failed and the others go on.

Without CUDA it runs a scaled-down version (d_model 64, 2 layers, seq 128, fp32, vocab 512, one
rank) so that it keeps working; the figures are then CPU figures and say so.

    python benchmarks/gpu_throughput.py                       # every model x ZeRO 1,2,3 on 1 GPU
    python benchmarks/gpu_throughput.py --gpus 8 --models gpt-1.3b --zero 1 --out bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = ("gpt-125m", "gpt-350m", "gpt-1.3b", "moe-1.7b-a0.5b")
MICRO_BATCH = {"gpt-125m": 16, "gpt-350m": 16, "gpt-1.3b": 8, "moe-1.7b-a0.5b": 8}  # x 2048 tokens, fits 80 GB
TARGET = {
    "model": "gpt-1.3b",
    "mfu": 0.45,
    "device": "H100",
    "gpus": 1,
    "text": ">= 45% MFU on one H100 (Megatron-LM 47%, llm-foundry 45.7%, torchtitan 33-39%)",
}
SCALED = {
    "model.d_model": 64,
    "model.n_layers": 2,
    "model.n_heads": 4,
    "model.n_kv_heads": None,
    "model.seq_len": 128,
    "model.vocab_size": None,
    "data.tokenizer.kind": "bpe",
    "data.tokenizer.vocab_size": 512,
    "data.name": "bench-cpu512",
    "precision": "fp32",
}
SCALED_MOE = {"model.moe.num_experts": 4, "model.moe.d_ff": 64}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=None, help="GPUs (ranks) per run; default: all visible (1 on CPU)")
    ap.add_argument(
        "--models", default=",".join(MODELS), help=f"comma-separated model presets (default {','.join(MODELS)})"
    )
    ap.add_argument("--zero", default="1,2,3", help="comma-separated ZeRO stages (default 1,2,3)")
    ap.add_argument("--steps", type=int, default=None, help="optimizer steps per run (default 30 on GPU, 6 on CPU)")
    ap.add_argument(
        "--log-every", type=int, default=None, help="log window in steps; the first is warm-up (default steps/3)"
    )
    ap.add_argument(
        "--micro-batch",
        type=int,
        default=None,
        help="micro-batch per GPU (default per model: "
        + ", ".join(f"{k} {v}" for k, v in MICRO_BATCH.items())
        + "; 4 on CPU)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra config override for every run (e.g. train.compile=true, train.activation_checkpointing=full)",
    )
    ap.add_argument("--data-dir", help="prepared data folder (data.out_dir); default data/<name> in the checkout")
    ap.add_argument(
        "--config",
        help="base train config (default configs/train/gpt-125m.yaml on GPU, configs/train/tiny.yaml on CPU)",
    )
    ap.add_argument("--work", help="folder for the run directories (default: a temporary folder, removed)")
    ap.add_argument("--out", help="write the results as JSON here")
    return ap.parse_args(argv)


def detect() -> tuple[bool, str, int]:
    """(CUDA available, device name, visible devices)."""
    import torch

    if torch.cuda.is_available():
        return True, torch.cuda.get_device_name(0), torch.cuda.device_count()
    return False, "cpu", 1


def overrides(model: str, zero: int, args, cuda: bool, gpus: int) -> dict:
    steps = args.steps or (30 if cuda else 6)
    log = args.log_every or max(1, steps // 3)
    mbs = args.micro_batch or (MICRO_BATCH.get(model, 8) if cuda else 4)
    over = {
        "model": model,
        "model.seq_len": 2048,
        "precision": "bf16",
        "deepspeed.zero_stage": zero,
        "train.tokens": None,
        "train.steps": steps,
        "train.log_every_steps": log,
        "train.micro_batch_size": mbs,
        "train.global_batch_size": mbs * gpus,
        "train.eval_every_steps": 0,
        "train.checkpoint_every_steps": 0,
        "schedule.warmup_steps": 1,
        "wandb.mode": "disabled",
    }
    if not cuda:
        over.update(SCALED)
        if model.startswith("moe"):
            over.update(SCALED_MOE)
    if args.data_dir:
        over["data.out_dir"] = args.data_dir
    return over


def command(base: str, over: dict, extra: list[str], run_dir: Path, gpus: int) -> list[str]:
    items = [f"{k}={'null' if v is None else v}" for k, v in over.items()] + extra
    tail = [base, *items, "--run-dir", str(run_dir), "--no-progress"]
    if gpus > 1:
        launcher = Path(sys.executable).parent / "deepspeed"
        port = str(random.randint(29500, 29999))
        return [str(launcher), "--num_gpus", str(gpus), "--master_port", port, "--module", "pretrain.cli", *tail]
    return [sys.executable, "-m", "pretrain.cli", *tail]


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def read_result(run_dir: Path) -> dict:
    recs = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    summary = json.loads((run_dir / "summary.json").read_text())
    windows = [r for r in recs if "tokens_per_s" in r][1:] or [r for r in recs if "tokens_per_s" in r]
    mem_key = "mem/max_allocated_gb" if any("mem/max_allocated_gb" in r for r in recs) else "mem/max_rss_gb"
    return {
        "tokens_per_s": _mean([r["tokens_per_s"] for r in windows]),
        "mfu": _mean([r.get("mfu") for r in windows]),
        "peak_mem_gb": max((r[mem_key] for r in recs if mem_key in r), default=None),
        "peak_mem_kind": mem_key,
        "peak_reserved_gb": max((r["mem/max_reserved_gb"] for r in recs if "mem/max_reserved_gb" in r), default=None),
        "step_s": _mean([r.get("time/step_s") for r in windows]),
        "comm_s": _mean([r.get("time/comm_s") for r in windows]),
        "peak_flops": summary.get("peak_flops"),
        "peak_source": summary.get("peak_source"),
        "flops_per_token": summary.get("flops_per_token"),
        "params": summary.get("params") or summary.get("n_params"),
        "windows": len(windows),
    }


def run_one(model: str, zero: int, args, cuda: bool, gpus: int, work: Path) -> dict:
    over = overrides(model, zero, args, cuda, gpus)
    run_dir = work / f"{model}-zero{zero}"
    base = args.config or str(REPO / ("configs/train/gpt-125m.yaml" if cuda else "configs/train/tiny.yaml"))
    cmd = command(base, over, args.set, run_dir, gpus)
    t0 = time.time()
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    row = {
        "model": model,
        "zero": zero,
        "gpus": gpus,
        "seq_len": over["model.seq_len"],
        "precision": over["precision"],
        "micro_batch": over["train.micro_batch_size"],
        "global_batch": over["train.global_batch_size"],
        "steps": over["train.steps"],
        "wall_s": round(time.time() - t0, 1),
        "command": " ".join(cmd),
    }
    if res.returncode != 0 or not (run_dir / "summary.json").exists():
        text = res.stdout[-4000:] + res.stderr[-4000:]
        oom = "out of memory" in text.lower()
        return {**row, "status": "oom" if oom else "failed", "error": text[-1500:]}
    return {**row, "status": "ok", **read_result(run_dir)}


def fmt(r: dict, device: str) -> str:
    name = f"{r['model']:<16} ZeRO-{r['zero']}"
    if r["status"] != "ok":
        return (
            f"{name}  {r['status'].upper()}: {r['error'].strip().splitlines()[-1][:120] if r['error'].strip() else ''}"
        )
    mfu = "n/a" if r["mfu"] is None or r["mfu"] != r["mfu"] else f"{r['mfu']:6.1%}"
    comm = "" if r["comm_s"] is None else f"  comm {r['comm_s'] * 1000:7.1f} ms/step"
    line = (
        f"{name}  {r['tokens_per_s']:10,.0f} tokens/s  MFU {mfu}  peak mem {r['peak_mem_gb']:6.2f} GB"
        f"  step {r['step_s'] * 1000:8.1f} ms{comm}"
    )
    if r["model"] == TARGET["model"]:
        met = (
            TARGET["device"] in device
            and r["gpus"] == TARGET["gpus"]
            and r["mfu"] is not None
            and r["mfu"] >= TARGET["mfu"]
        )
        line += f"   target {TARGET['text']}" + (": MET" if met else "")
    return line


def main(argv=None) -> int:
    args = parse_args(argv)
    cuda, device, visible = detect()
    gpus = args.gpus or (visible if cuda else 1)
    if not cuda and gpus != 1:
        print("no CUDA: the scaled-down CPU version runs on 1 rank", file=sys.stderr)
        gpus = 1
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    stages = [int(z) for z in args.zero.split(",") if z.strip()]
    bad = [m for m in models if not (REPO / "configs/models" / f"{m}.yaml").exists()] + [
        str(z) for z in stages if z not in (0, 1, 2, 3)
    ]
    if bad:
        print(
            f"unknown model preset or ZeRO stage: {', '.join(bad)} (presets: configs/models/; stages 0-3)",
            file=sys.stderr,
        )
        return 2
    load = os.getloadavg()
    if cuda:
        print(f"device: {device} x {gpus}, bf16, sequence 2048")
    else:
        print(
            "no CUDA: SCALED-DOWN CPU version (d_model 64, 2 layers, seq 128, fp32, vocab 512, 1 rank); "
            "these are CPU figures, not GPU ones"
        )
    print(f"load average at start: {load[0]:.2f}")
    work_tmp = None if args.work else tempfile.TemporaryDirectory(prefix="gpu-bench-")
    work = Path(args.work or work_tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for model in models:
            for zero in stages:
                r = run_one(model, zero, args, cuda, gpus, work)
                results.append(r)
                print(fmt(r, device), flush=True)
    finally:
        if work_tmp:
            work_tmp.cleanup()
    out = {
        "device": device,
        "cuda": cuda,
        "scaled_down": not cuda,
        "gpus": gpus,
        "load_start": load[0],
        "load_end": os.getloadavg()[0],
        "target": TARGET,
        "results": results,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2))
        print(f"wrote {args.out}")
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
