"""The router study's paired-seed protocol (`python benchmarks/moe_routers.py --paired ...`).

Design, fixed before any result (docs/moe.md, "The router study"):
- Sizes: n100k (2 layers) and n200k (4 layers), d_model 64, dense d_ff 192, gutenberg100 (BPE 512),
  seq_len 128, ~18 tokens per active parameter (the earlier study's tokens). `mini` is the
  test suite's two-seed miniature (n50k, a few steps, the caller's prepared data).
- Shapes: `e8k2` (8 experts of d_ff 96, top-2) and `e16k4` (16 of d_ff 48, top-4): the same active
  FFN as the dense model; finer experts are where routing gains are reported to grow.
- Every run dropless (capacity null), micro-batch 4 of a 16-sequence global batch (4
  micro-batches per step, so the global-batch balance scope differs from the micro-batch one).
- Stage `tune` (n100k, seeds 100-101, apart from the final seeds so tuning does not select on
  them): the baseline's aux coefficient grid, the global-batch scope, aux_free_bias's rate,
  sigmoid_threshold's rate and relu_l1, on the same budget. Stage `final` (both sizes, seeds 0-7):
  the tuned softmax_topk baseline, aux_free_bias and sigmoid_threshold at their tuned settings;
  token_hash at seeds 0-2 (how much any learned assignment adds).
- Paired seeds: `train.seed` sets both the initialisation (MoE arms of one shape build identical
  parameters) and the data order, so every arm at a seed sees the same start and batches.
- Report per size and shape: final val loss of each arm, its paired difference to the baseline
  with a 95% t interval and as a percentage, the compute multiplier with a bootstrap interval,
  the realised training FLOPs against the baseline's (equal within ±2%, else flagged) and router
  health (imbalance over the step and per micro-batch, load entropy, dead experts, realised
  experts per token in training and evaluation, k spread, routing change between the last two
  evaluations). The minimum detectable difference at 80% power is printed first, from a prior
  paired sd (`--prior-sd`, default 0.013 nats: the earlier study's seed-paired sd of MoE minus
  dense at n200k, docs/benchmarks.md).
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
sys.path.insert(0, str(REPO / "benchmarks"))

import moe_paired_stats as ps  # noqa: E402

from launch.sweep.expand import plan as plan_sweep  # noqa: E402

SIZES = {  # model, MoE tokens (equal FLOPs per size), measured minutes per run on one core
    "n100k": {"model": "n100k", "tokens": 2981888, "minutes": 6.5},
    "n200k": {"model": "n200k", "tokens": 4968448, "minutes": 13.0},
    "mini": {"model": "n50k", "steps": 8, "minutes": 0.1},
}
SHAPES = {"e8k2": {"num_experts": 8, "top_k": 2, "d_ff": 96}, "e16k4": {"num_experts": 16, "top_k": 4, "d_ff": 48}}
MINI_SHAPES = {"e4k2": {"num_experts": 4, "top_k": 2, "d_ff": 48}}
BASELINE = "softmax_topk"
FINAL_SEEDS, FEW_SEEDS, TUNE_SEEDS = list(range(8)), [0, 1, 2], [100, 101]
TUNE_ARMS = {
    **{f"softmax_topk-aux{c:g}": {"router": "softmax_topk", "aux_loss_coef": c} for c in (0.003, 0.01, 0.03, 0.1)},
    **{
        f"softmax_topk-global-aux{c:g}": {
            "router": "softmax_topk",
            "aux_loss_scope": "global_batch",
            "aux_loss_coef": c,
        }
        for c in (0.01, 0.03)
    },
    **{f"aux_free_bias-rate{r:g}": {"router": "aux_free_bias", "bias_update_rate": r} for r in (0.001, 0.003, 0.01)},
    **{
        f"sigmoid_threshold-rate{r:g}": {"router": "sigmoid_threshold", "threshold_update_rate": r}
        for r in (0.05, 0.2, 0.5)
    },
    "relu_l1": {"router": "relu_l1"},
}
FINAL_FAMILIES = ("softmax_topk", "aux_free_bias", "sigmoid_threshold")  # tuned; token_hash at FEW_SEEDS


MINI_ARMS = ("softmax_topk", "sigmoid_threshold")


def family(arm: str) -> str:
    """The router family of a tuning arm, within which the tuned setting is chosen (softmax_topk's
    includes the global-batch scope: the tuned baseline is the best coefficient and scope)."""
    return arm.split("-")[0]


def arms_for(stage: str, tuned: dict[str, dict] | None) -> dict[str, tuple[dict, list[int]]]:
    """{arm: (model.moe settings without the shape, seeds)}."""
    if stage == "tune":
        return {a: (m, TUNE_SEEDS) for a, m in TUNE_ARMS.items()}
    tuned = tuned or {}
    default = {
        "softmax_topk": {"router": "softmax_topk", "aux_loss_coef": 0.01},
        "aux_free_bias": {"router": "aux_free_bias", "bias_update_rate": 0.001},
        "sigmoid_threshold": {"router": "sigmoid_threshold", "threshold_update_rate": 0.2},
    }
    out = {f: (tuned.get(f, default[f]), FINAL_SEEDS) for f in FINAL_FAMILIES}
    out["token_hash"] = ({"router": "token_hash"}, FEW_SEEDS)
    return out


def study_spec(size: str, stage: str, tuned=None, data: dict | None = None, root: Path | None = None) -> dict:
    """The sweep spec of one size and stage: zip axes (arm label, model.moe) x seeds.

    Arms at different seed counts share one spec: every arm gets the union of seeds and
    `runs_for` keeps each arm's own seeds (the launcher trains only those)."""
    sz = SIZES[size]
    shapes = MINI_SHAPES if size == "mini" else SHAPES
    arms = arms_for(stage, tuned)
    if size == "mini":
        arms = {a: (arms_for("final", None)[a][0], [0, 1]) for a in MINI_ARMS}
    labels, moes = [], []
    for shape, geom in shapes.items():
        for arm, (moe, _) in arms.items():
            labels.append(f"{shape}-{arm}")
            moes.append({**geom, **moe, "capacity_factor": None})
    seeds = sorted({s for _, ss in arms.values() for s in ss})
    base = {
        "model": sz["model"],
        "model.seq_len": 128,
        "data": "gutenberg100",
        "train.micro_batch_size": 4,
        "train.global_batch_size": 16,
        "train.log_every_steps": 10,
        "train.eval_every_steps": 100,
        "train.eval_tokens": 32768,
        "train.checkpoint_every_steps": 500,
        "deepspeed.zero_stage": 0,
        "wandb.mode": "disabled",
    }
    if "tokens" in sz:
        base["train.tokens"] = sz["tokens"]
    else:  # the miniature: a few steps on the caller's data
        base.update(
            {
                "model.seq_len": 64,
                "train.tokens": None,
                "train.steps": sz["steps"],
                "train.micro_batch_size": 2,
                "train.global_batch_size": 4,
                "train.log_every_steps": 2,
                "train.eval_every_steps": 4,
                "train.eval_tokens": 1024,
                "train.checkpoint_every_steps": 100,
            }
        )
        del base["data"]
    base.update(data or {})
    name = f"moe-routers-{size}-{stage}"
    return {
        "name": name,
        "base": "configs/train/tiny.yaml",
        "set": base,
        "kind": "zip",
        "axes": {"extras.arm": labels, "model.moe": moes},
        "seeds": seeds,
        "runs_dir": str(root / name) if root else None,
        "executor": {"local": {"workers": 2, "threads": 1}},
    }


def arm_seeds(size: str, stage: str, tuned=None) -> dict[str, list[int]]:
    arms = arms_for(stage, tuned)
    if size == "mini":
        return {f"{sh}-{a}": [0, 1] for sh in MINI_SHAPES for a in MINI_ARMS}
    return {f"{sh}-{a}": ss for sh in SHAPES for a, (_, ss) in arms.items()}


def runs_for(plan, seeds: dict[str, list[int]]) -> list:
    return [r for r in plan.runs if r.axes.get("seed") in seeds.get(r.axes.get("extras.arm"), [])]


def budget(size: str, stage: str, tuned=None) -> dict:
    n = sum(len(s) for s in arm_seeds(size, stage, tuned).values())
    hours = n * SIZES[size]["minutes"] / 60
    return {"runs": n, "cpu_hours": hours}


def write_spec(spec: dict, path: Path) -> Path:
    spec = {k: v for k, v in spec.items() if v is not None}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def launch(spec_path: Path, names: list[str], workers: int, threads: int) -> int:
    cmd = [sys.executable, "-m", "launch.cli", "sweep", "launch", str(spec_path), "--only", ",".join(names)]
    cmd += ["--workers", str(workers), "--threads", str(threads), "--no-progress"]
    print(f"$ scalelab sweep launch {spec_path} --only <{len(names)} runs> --workers {workers}", flush=True)
    return subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}).returncode


HEALTH = {  # summary column: metrics.jsonl key, read from the last record that has it
    "imbalance": "moe/imbalance",
    "imbalance_micro": "moe/imbalance_micro",
    "load_entropy": "moe/load_entropy",
    "dead_experts": "moe/dead_experts",
    "k_std": "moe/k_std",
    "routing_change": "moe/routing_change",
}


def read_run(run_dir: Path) -> dict | None:
    p = Path(run_dir) / "summary.json"
    if not p.exists() or json.loads(p.read_text()).get("status") != "done":
        return None
    summary, curve = ps.read_curve(run_dir)
    recs = [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    health = {}
    for col, key in HEALTH.items():
        vals = [r[key] for r in recs if key in r]
        health[col] = vals[-1] if vals else None
    moe = summary.get("moe") or {}
    return {
        "val_loss": summary["final_val_loss"],
        "flops": summary.get("flops_realised") or summary["flops"],
        "flops_kind": summary["flops_kind"],
        "curve": curve,
        "active_experts": moe.get("active_experts"),
        "val_active_experts": moe.get("val_active_experts"),
        **health,
    }


def analyse(plan, seeds: dict[str, list[int]], baseline: str) -> dict:
    """Per shape: every arm against the baseline arm of that shape, paired by seed."""
    runs: dict[str, dict[int, dict]] = {}
    for r in runs_for(plan, seeds):
        got = read_run(r.run_dir)
        if got is not None:
            runs.setdefault(r.axes["extras.arm"], {})[r.axes["seed"]] = got
    out: dict[str, dict] = {}
    for label, by_seed in sorted(runs.items()):
        shape, arm = label.split("-", 1)
        base = runs.get(f"{shape}-{baseline}", {})
        row = {
            "seeds": sorted(by_seed),
            "val_loss": ps.t_interval([v["val_loss"] for v in by_seed.values()]),
            "flops": sum(v["flops"] for v in by_seed.values()) / len(by_seed),
            "flops_kind": sorted({v["flops_kind"] for v in by_seed.values()}),
        }
        for col in ("active_experts", "val_active_experts", *HEALTH):
            vals = [v[col] for v in by_seed.values() if v[col] is not None]
            row[col] = sum(vals) / len(vals) if vals else None
        if base and arm != baseline:
            row["paired"] = ps.paired_difference(
                {s: v["val_loss"] for s, v in by_seed.items()}, {s: v["val_loss"] for s, v in base.items()}
            )
            mults = [ps.compute_multiplier(by_seed[s]["curve"], base[s]["curve"]) for s in by_seed if s in base]
            row["multiplier"] = ps.bootstrap_multiplier(mults)
            bf = sum(v["flops"] for v in base.values()) / len(base)
            row["equal_compute"] = ps.equal_compute({"arm": row["flops"], "base": bf}, "base")["arm"]
        out.setdefault(shape, {})[arm] = row
    return out


def fmt(x, f=".4f") -> str:
    return "-" if x is None else f"{x:{f}}"


def print_report(res: dict, baseline: str) -> None:
    for shape, arms in res.items():
        print(f"\n{shape}: paired differences to {baseline} (same seeds); 95% t intervals; multiplier: bootstrap 95%")
        hdr = (
            f"{'arm':34s} {'n':>2s} {'val loss':>8s} {'diff [95% CI]':>27s} {'%':>6s} {'multiplier':>19s} "
            f"{'FLOPs/base':>10s} {'k':>5s} {'k val':>5s} {'k sd':>5s} {'imb':>5s} {'imb mb':>6s} "
            f"{'H/lnE':>5s} {'dead':>4s} {'chg':>5s}"
        )
        print(hdr + "\n" + "-" * len(hdr))
        for arm, a in sorted(arms.items(), key=lambda kv: kv[1]["val_loss"]["mean"]):
            p, m, eq = a.get("paired"), a.get("multiplier"), a.get("equal_compute")
            diff = f"{p['mean']:+.4f} [{fmt(p['lo'], '+.4f')}, {fmt(p['hi'], '+.4f')}]" if p else "-"
            mult = f"{m['mean']:.2f} [{fmt(m['lo'], '.2f')}, {fmt(m['hi'], '.2f')}]" if m and m["n"] else "-"
            ratio = f"{eq['ratio']:.3f}{'' if eq['ok'] else '!'}" if eq else "1"
            print(
                f"{arm:34s} {a['val_loss']['n']:2d} {a['val_loss']['mean']:8.4f} {diff:>27s} "
                f"{fmt(p and p['percent'], '+.2f'):>6s} {mult:>19s} {ratio:>10s} {fmt(a['active_experts'], '.2f'):>5s} "
                f"{fmt(a['val_active_experts'], '.2f'):>5s} {fmt(a['k_std'], '.2f'):>5s} "
                f"{fmt(a['imbalance'], '.2f'):>5s} "
                f"{fmt(a['imbalance_micro'], '.2f'):>6s} {fmt(a['load_entropy'], '.3f'):>5s} "
                f"{fmt(a['dead_experts'], '.0f'):>4s} {fmt(a['routing_change'], '.2f'):>5s}"
            )
    print(
        "diff: arm minus baseline val loss at the same seed (mean, 95% t interval); %: of the baseline's loss. "
        "multiplier: baseline FLOPs that buy the arm's loss over the arm's FLOPs (>1 better; geometric mean over "
        "seeds). FLOPs/base: realised training FLOPs over the baseline's ('!' outside ±2%). k: realised experts "
        "per token, training mean / at evaluation; k sd: spread over tokens (last log). imb: max/mean load over "
        "the step, imb mb: per micro-batch; H/lnE: load entropy; dead: experts under 1/(4E) load, summed over "
        "layers; chg: routing change of the probe between the last two evaluations."
    )


def choose_tuned(res: dict) -> dict[str, dict]:
    """The tuned setting of each family: lowest mean val loss over shapes and seeds of the tune stage."""
    total: dict[str, float] = {}  # each arm's mean val loss summed over the shapes
    for arms in res.values():
        for arm, a in arms.items():
            total[arm] = total.get(arm, 0.0) + a["val_loss"]["mean"]
    best: dict[str, str] = {}
    for arm, score in total.items():
        fam = family(arm)
        if fam not in best or score < total[best[fam]]:
            best[fam] = arm
    return {fam: TUNE_ARMS[arm] for fam, arm in best.items() if arm in TUNE_ARMS}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description="the router study's paired-seed protocol")
    ap.add_argument("--size", choices=list(SIZES), default="n100k")
    ap.add_argument("--stage", choices=["tune", "final"], default="tune")
    ap.add_argument("--tuned", help="tune.json written by the tune stage (final stage: the tuned settings)")
    ap.add_argument("--prior-sd", type=float, default=0.013, help="paired sd (nats) assumed for the stated power")
    ap.add_argument("--plan-only", action="store_true", help="print the design, budget and power; train nothing")
    ap.add_argument("--no-launch", action="store_true", help="only read finished runs")
    ap.add_argument("--runs-root", default="runs", help="where the study's run directories go")
    ap.add_argument("--set", nargs="*", default=[], help="KEY=VALUE overrides of every run (e.g. data.out_dir=...)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="output (default: <runs>/<stage>.json)")
    args = ap.parse_args(argv)
    os.chdir(REPO)
    tuned = json.loads(Path(args.tuned).read_text())["tuned"] if args.tuned else None
    data = dict(kv.split("=", 1) for kv in args.set)
    data = {k: (None if v == "null" else v) for k, v in data.items()}
    root = Path(args.runs_root).resolve()
    spec = study_spec(args.size, args.stage, tuned, data, root)
    seeds = arm_seeds(args.size, args.stage, tuned)
    n = len(FINAL_SEEDS if args.stage == "final" else TUNE_SEEDS)
    if args.size == "mini":
        n = 2
    mde = ps.min_detectable_difference(args.prior_sd, n)
    b = budget(args.size, args.stage, tuned)
    shapes = ", ".join(MINI_SHAPES if args.size == "mini" else SHAPES)
    print(
        f"design: {args.size} {args.stage}, {len(seeds)} arms over shapes {shapes}, "
        f"{b['runs']} runs, ~{b['cpu_hours']:.1f} CPU-hours at {SIZES[args.size]['minutes']} min per run on one core\n"
        f"power (stated before results): with {n} paired seeds and a paired sd of {args.prior_sd} nats, the smallest "
        f"difference detected at 80% power (two-sided alpha 0.05) is {mde:.4f} nats"
    )
    spec_path = write_spec(spec, root / spec["name"] / "spec.yaml")
    if args.plan_only:
        print(f"spec: {spec_path}")
        return {"budget": b, "mde": mde}
    plan = plan_sweep(spec_path)
    todo = [r.name for r in runs_for(plan, seeds) if read_run(r.run_dir) is None]
    if todo and not args.no_launch:
        rc = launch(spec_path, todo, args.workers, args.threads)
        if rc:
            print(f"warning: the sweep launch exited {rc}; reporting the finished runs")
    baseline = BASELINE if args.stage == "final" or args.size == "mini" else "softmax_topk-aux0.01"
    res = analyse(plan, seeds, baseline)
    print_report(res, baseline)
    out = {"size": args.size, "stage": args.stage, "budget": b, "mde": mde, "prior_sd": args.prior_sd, "arms": res}
    if args.stage == "tune":
        out["tuned"] = choose_tuned(res)
        print(f"\ntuned settings (lowest mean val loss over shapes and seeds): {json.dumps(out['tuned'])}")
    path = Path(args.json) if args.json else root / spec["name"] / f"{args.stage}.json"
    path.write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {path}")
    return out


if __name__ == "__main__":
    main()
