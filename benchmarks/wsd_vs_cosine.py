"""WSD cooldown branches vs separate cosine runs at the same (N, D): final val losses and compute.

    python benchmarks/wsd_vs_cosine.py [--models n50k,n100k] [--steps 1024] [--fractions 0.25,0.5,1]
        [--lr LR] [--cooldown 0.2] [--out runs/wsd-vs-cosine] [--workers 2] [--no-launch] [--json PATH]

Two sweeps on the same base (configs/train/tiny.yaml, 128-token sequences, 8 per step, BPE 512,
peak lr as the base, warmup 4 steps, lr down to 0 at the end):
- kind `wsd`: per model one stable run of `--steps` steps with a 1-sqrt cooldown over its last
  `--cooldown` fraction, and a cooldown branch (the same fraction of its own steps) at each other
  fraction of its tokens, started from the stable run's checkpoint (Hägele et al. 2024);
- kind `grid`: a cosine run per (model, tokens) of the same points, each trained from scratch.
Both are written as spec files under `--out` and trained by `scalelab sweep launch`, which skips
finished runs and resumes partial ones (and, with `--retry-failed`, trains failed ones again):
rerunning this script trains only what is missing, and
`--no-launch` only reads. Per point it prints the two final val losses (the trainer's held-out
loss on the same validation tokens), their relative difference (wsd / cosine - 1), and the
compute: the wsd study's FLOPs with each stable prefix counted once (`rundir.read.compute_totals`)
over the cosine runs' FLOPs (the same (N, D) points trained separately).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rundir.read import compute_totals, load_runs  # noqa: E402

SET = {
    "model.seq_len": 128,
    "data.name": "v512",
    "data.tokenizer.vocab_size": 512,
    "train.micro_batch_size": 8,
    "train.global_batch_size": 8,
    "train.eval_every_steps": 0,
    "train.eval_tokens": 65536,
    "train.log_every_steps": 8,
    "train.checkpoint_every_steps": 100000,
    "schedule.min_lr_ratio": 0.0,
    "deepspeed.zero_stage": 0,
    "wandb.mode": "disabled",
}
TOKENS_PER_STEP = 128 * 8
WARMUP = 4


def specs(args) -> dict[str, dict]:
    out = Path(args.out).resolve()
    models = args.models.split(",")
    fracs = [float(f) for f in args.fractions.split(",")]
    d_max = args.steps * TOKENS_PER_STEP
    base = str(REPO / "configs/train/tiny.yaml")
    common = {**SET, **({"optim.lr": args.lr} if args.lr is not None else {})}
    wsd = {
        "name": "wsd",
        "base": base,
        "set": common,
        "kind": "wsd",
        "runs_dir": str(out / "wsd"),
        "wsd": {
            "models": models,
            "tokens": d_max,
            "fractions": fracs,
            "cooldown": args.cooldown,
            "decay_shape": "sqrt",
            "warmup_steps": WARMUP,
        },
    }
    tokens = sorted({int(round(f * args.steps)) * TOKENS_PER_STEP for f in fracs})
    cosine = {
        "name": "cosine",
        "base": base,
        "kind": "grid",
        "runs_dir": str(out / "cosine"),
        "set": {**common, "schedule.name": "cosine", "schedule.warmup_steps": WARMUP},
        "axes": {"model": models, "train.tokens": tokens},
    }
    return {"wsd": wsd, "cosine": cosine}


def launch(path: Path, args) -> int:
    # --retry-failed: a run that failed (e.g. a port taken by another process at start) is trained again
    cmd = [
        sys.executable,
        "-m",
        "launch.cli",
        "sweep",
        "launch",
        str(path),
        "--workers",
        str(args.workers),
        "--retry-failed",
        "--no-progress",
    ]
    print(f"$ scalelab sweep launch {path} --workers {args.workers} --retry-failed", flush=True)
    return subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}).returncode


def rows_of(root: Path) -> list[dict]:
    df, problems = load_runs(root)
    for p in problems:
        print(f"problem: {p['path']}: {p['problem']}")
    return [r for r in df.to_dict("records") if r.get("status") == "done"]


def compare(wsd_rows: list[dict], cos_rows: list[dict]) -> dict:
    cos = {(r["model"], int(r["tokens"])): r for r in cos_rows}
    points = []
    for r in sorted(wsd_rows, key=lambda r: (r["params"], r["tokens"])):
        c = cos.get((r["model"], int(r["tokens"])))
        if c is None:
            continue
        rel = r["final_val_loss"] / c["final_val_loss"] - 1
        points.append(
            {
                "model": r["model"],
                "N": int(r["params"]),
                "D": int(r["tokens"]),
                "role": r.get("axis.role"),
                "wsd_run": r["run"],
                "cosine_run": c["run"],
                "wsd_val_loss": r["final_val_loss"],
                "cosine_val_loss": c["final_val_loss"],
                "rel_diff": rel,
                "wsd_flops": r["flops"],
                "wsd_computed_flops": r.get("computed_flops", r["flops"]),
                "cosine_flops": c["flops"],
            }
        )
    matched = {p["wsd_run"] for p in points}
    computed, separate = compute_totals([r for r in wsd_rows if r["run"] in matched])
    cosine_total = sum(p["cosine_flops"] for p in points)
    return {
        "points": points,
        "wsd_flops_shared_once": computed,
        "wsd_flops_as_separate_runs": separate,
        "cosine_flops": cosine_total,
        "compute_ratio": computed / cosine_total if cosine_total else None,
        "max_abs_rel_diff": max((abs(p["rel_diff"]) for p in points), default=None),
        "mean_rel_diff": sum(p["rel_diff"] for p in points) / len(points) if points else None,
    }


def report(res: dict) -> None:
    hdr = f"{'model':6s} {'N':>7s} {'D':>8s} {'wsd run':>13s} {'wsd val':>8s} {'cosine val':>10s} {'rel diff':>9s}"
    print("\n" + hdr + "\n" + "-" * len(hdr))
    for p in res["points"]:
        print(
            f"{p['model']:6s} {p['N']:>7d} {p['D']:>8d} {p['role'] or '':>13s} {p['wsd_val_loss']:8.4f} "
            f"{p['cosine_val_loss']:10.4f} {100 * p['rel_diff']:+8.2f}%"
        )
    if not res["points"]:
        print("no finished point in both sweeps yet")
        return
    print(
        f"\n{len(res['points'])} points; |rel diff| max {100 * res['max_abs_rel_diff']:.2f}%, mean rel diff "
        f"{100 * res['mean_rel_diff']:+.2f}% (wsd / cosine - 1, final val loss)"
    )
    print(
        f"compute: wsd {res['wsd_flops_shared_once']:.3e} FLOPs with each stable prefix counted once "
        f"({res['wsd_flops_as_separate_runs']:.3e} as separate runs); cosine runs {res['cosine_flops']:.3e}; "
        f"ratio {res['compute_ratio']:.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="n50k,n100k", help="model presets, comma-separated")
    ap.add_argument("--steps", type=int, default=1024, help="the stable run's steps (D_max = steps x 1,024 tokens)")
    ap.add_argument("--fractions", default="0.25,0.5,1", help="token counts as fractions of D_max")
    ap.add_argument("--lr", type=float, help="peak lr of every run (default: the base's, 3e-3)")
    ap.add_argument("--cooldown", type=float, default=0.2, help="each wsd run's cooldown as a fraction of its steps")
    ap.add_argument("--out", default="runs/wsd-vs-cosine", help="folder for the two specs and their runs")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-launch", action="store_true", help="only read the runs already there")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, spec in specs(args).items():
        paths[name] = out / f"{name}.yaml"
        paths[name].write_text(yaml.safe_dump(spec, sort_keys=False))
    load0 = os.getloadavg()
    if not args.no_launch:
        for name in ("wsd", "cosine"):
            rc = launch(paths[name], args)
            if rc != 0:
                print(f"sweep {name} exited {rc}; comparing what finished")
    res = compare(rows_of(out / "wsd"), rows_of(out / "cosine"))
    res["load"] = {"before": load0, "after": os.getloadavg()}
    report(res)
    print(f"load average before {load0[0]:.2f}, after {res['load']['after'][0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
