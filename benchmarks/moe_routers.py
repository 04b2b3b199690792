"""Train the same tiny MoE with each router (and a dense model of equal active parameters) on
the bundled corpus for the same tokens, and print one comparison table.

    python benchmarks/moe_routers.py [--tokens 250000] [--threads 1] [--out runs/bench-moe-routers]

Every run goes through `scalelab train` (a subprocess each, so they cannot interfere) with
configs/train/tiny-moe.yaml (8 experts of d_ff 96, top-2, capacity factor 1.25) or, for the
dense reference, configs/train/tiny.yaml (d_ff 192: the same active FFN width). Same seed, data
order, tokens, lr and schedule everywhere. expert_choice runs with capacity factor 1.0 so that it
spends the same expert compute per token as top-2 (its capacity factor *is* its compute), and
aux_free_bias uses bias_update_rate 0.01 because the DeepSeek-V3 default (0.001) barely moves in
a run this short. Imbalance and dropped fraction are averaged over the last quarter of the log
records (the per-record values come from one micro-batch and are noisy). Runs that already have
a summary.json are reused unless --fresh is given.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

RUNS = {
    "dense (equal active)": ("tiny.yaml", []),
    "softmax_topk": ("tiny-moe.yaml", ["model.moe.router=softmax_topk"]),
    "aux_free_bias": ("tiny-moe.yaml", ["model.moe.router=aux_free_bias", "model.moe.bias_update_rate=0.01"]),
    "expert_choice": ("tiny-moe.yaml", ["model.moe.router=expert_choice", "model.moe.capacity_factor=1.0"]),
    "sinkhorn": ("tiny-moe.yaml", ["model.moe.router=sinkhorn"]),
}


def run(name: str, config: str, extra: list[str], args) -> Path:
    run_dir = Path(args.out) / name.split(" ")[0]
    if args.fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    if (run_dir / "summary.json").exists():
        return run_dir
    over = [f"train.tokens={args.tokens}", f"train.threads={args.threads}", "wandb.mode=disabled",
            "train.eval_every_steps=0", f"train.log_every_steps={args.log_every}", "train.checkpoint_every_steps=0",
            *extra]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(args.threads)}
    cmd = [sys.executable, "-m", "launch.cli", "train", str(REPO / "configs/train" / config), *over,
           "--run-dir", str(run_dir), "--no-progress"]
    print(f"[{name}] {' '.join(cmd[3:])}", flush=True)
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"{name} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return run_dir


def tail_mean(recs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in recs if key in r]
    if not vals:
        return None
    tail = vals[-max(1, len(vals) // 4):]
    return sum(tail) / len(tail)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=250_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "runs" / "bench-moe-routers"))
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--only", nargs="*", help="subset of runs by name")
    args = ap.parse_args()
    rows = []
    for name, (config, extra) in RUNS.items():
        if args.only and name.split(" ")[0] not in args.only:
            continue
        d = run(name, config, extra, args)
        s = json.loads((d / "summary.json").read_text())
        recs = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
        rows.append((name, s, tail_mean(recs, "moe/imbalance"), tail_mean(recs, "moe/dropped_frac"),
                     tail_mean(recs, "tokens_per_s")))
    print(f"\nrouter comparison: {args.tokens} tokens each, {args.threads} thread(s), same seed and data order")
    print(f"{'run':22s} {'val loss':>8s} {'train loss':>10s} {'imbalance':>9s} {'dropped':>8s} {'tokens/s':>9s} "
          f"{'vs dense':>8s} {'active params':>13s} {'total params':>12s}")
    dense_tps = rows[0][4] if rows and rows[0][0].startswith("dense") else None
    for name, s, imb, drop, tps in rows:
        imb_s = "-" if imb is None else f"{imb:.2f}"
        drop_s = "-" if drop is None else f"{100 * drop:.1f}%"
        rel = f"{tps / dense_tps:.2f}x" if dense_tps and tps else "-"
        print(f"{name:22s} {s['final_val_loss']:8.4f} {s['final_loss']:10.4f} {imb_s:>9s} {drop_s:>8s} "
              f"{tps:9.0f} {rel:>8s} {s.get('active_params', s['params']):13,d} {s['params']:12,d}")


if __name__ == "__main__":
    main()
