"""The router study: does an 8-expert top-2 MoE beat the dense model of equal active parameters at
equal training FLOPs, and which router does it best? Prints one table and writes a JSON.

    python benchmarks/moe_routers.py [--spec configs/sweeps/moe-vs-dense-n200k.yaml]
        [--trend configs/sweeps/moe-vs-dense-n100k.yaml ...] [--best 2] [--workers 2] [--threads 1]
        [--no-launch] [--json PATH]

The runs are the sweep's (`--spec`, kind zip: dense and one MoE per router, each with tokens set
so that every run spends the same training FLOPs, times seeds), trained by `scalelab sweep
launch`, which skips finished runs and resumes partial ones: rerunning this script only trains
what is missing, and `--no-launch` only reads. Seeds are spent where they matter: first every arm
at the first seed plus the dense model at every seed, then every seed of the `--best` routers
(lowest mean validation loss so far); the other routers keep one seed. `--trend` specs (the same
study at other sizes) train the dense model and the best router at their first seed, for the
size trend of the compute ratio.

`--paired` runs the router study's second protocol instead (docs/moe.md, "The router study"):
paired seeds, a tuned baseline, equal realised FLOPs, intervals and a stated power:

    python benchmarks/moe_routers.py --paired --size n100k --stage tune      # the grids, 2 seeds
    python benchmarks/moe_routers.py --paired --size n200k --stage final --tuned PATH/tune.json
    python benchmarks/moe_routers.py --paired --size n200k --stage final --plan-only   # budget, MDE

FLOPs: models/accounting.py's training FLOPs per token, 6 x active matmul parameters (output
projection and router included; top_k routed experts, expert_choice k x capacity factor) + 12 x
layers x d_model x seq_len for attention, times tokens; nominal: assignments dropped beyond
capacity are still counted. "compute to reach dense": the FLOPs at which an MoE run's validation
curve first reaches the dense model's final validation loss (mean over its seeds), interpolated
between evaluations, over the dense run's FLOPs. Router metrics are means over all log records
(one micro-batch each) and per quarter of training; see scaling/data/router_stats.py.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from launch.sweep.expand import plan as plan_sweep  # noqa: E402
from launch.sweep.naming import axis_label  # noqa: E402
from scaling.data import router_stats as st  # noqa: E402

TARGET = 0.7  # the issue's bar: MoE reaches the dense final loss with <= 0.7x its training FLOPs
DEFAULT_SPEC = "configs/sweeps/moe-vs-dense-n200k.yaml"
DEFAULT_TREND = ["configs/sweeps/moe-vs-dense-n100k.yaml", "configs/sweeps/moe-vs-dense-n400k.yaml"]
KEYS = {
    "imbalance": "moe/imbalance",
    "max_imbalance": "moe/max_imbalance",
    "dropped_frac": "moe/dropped_frac",
    "z_loss": "moe/z_loss",
    "router_entropy": "moe/entropy",
    "util_entropy": "util_entropy",
    "aux_loss": "moe/aux_loss",
}


def arm_of(run) -> str:
    """'dense', or the MoE arm's sweep label less its expert count: the router, plus `-dropless`
    / `-sh1` where the arm sets them (launch.sweep.naming)."""
    label = axis_label("model.moe", run.axes.get("model.moe"))
    return re.sub(r"^e\d+k\d+-", "", label)


def done(run) -> bool:
    p = run.run_dir / "summary.json"
    return p.exists() and json.loads(p.read_text()).get("status") == "done"


def launch(spec: str, runs: list, args, log: list) -> None:
    todo = [r.name for r in runs if not done(r)]
    if not todo or args.no_launch:
        return
    load0 = os.getloadavg()[0]
    cmd = [
        sys.executable,
        "-m",
        "launch.cli",
        "sweep",
        "launch",
        spec,
        "--only",
        ",".join(todo),
        "--workers",
        str(args.workers),
        "--threads",
        str(args.threads),
        "--no-progress",
    ]
    print(f"$ scalelab sweep launch {spec} --only {','.join(todo)}", flush=True)
    res = subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    log.append(
        {"spec": spec, "runs": todo, "rc": res.returncode, "load_before": load0, "load_after": os.getloadavg()[0]}
    )


def analyse_run(run) -> dict:
    summary, recs = st.read_run(run.run_dir)
    experts = st.add_utilisation_entropy(recs)
    out = {
        "run": run.name,
        "seed": run.axes.get("seed"),
        "final_val_loss": summary["final_val_loss"],
        "final_loss": summary["final_loss"],
        "flops": summary["flops"],
        "tokens": summary["tokens"],
        "flops_per_token": summary["flops_per_token"],
        "active_params": summary.get("active_params", summary["params"]),
        "active_non_embedding_params": summary.get("active_non_embedding_params", summary["non_embedding_params"]),
        "params": summary["params"],
        "tokens_per_s": summary["tokens_per_s"],
        "wall_s": summary["wall_s"],
        "curve": st.val_curve(recs),
        "experts": experts,
    }
    for name, key in KEYS.items():
        out[name] = {"mean": st.overall_mean(recs, key), "quarters": st.quarter_means(recs, key)}
    return out


def causal_val_loss(run_dir: Path) -> float:
    """Validation loss of a finished run with causal routing (`set_causal_routing`: expert_choice
    becomes token-choice top-k over the same probabilities, the function generation and lm-eval
    use), on the same windows as the trainer's val_loss. expert_choice's logged val_loss routes
    over the whole batch, later tokens included, so only this figure compares with causal routers."""
    import torch

    from models.moe.routers import set_causal_routing
    from pretrain.config.loader import load_train_config
    from pretrain.data.prepare import output_dir
    from pretrain.data.prepared import load_prepared
    from pretrain.evaluation import HeldOutEval
    from rundir.layout import RunDir
    from rundir.weights import load_run

    run = load_run(run_dir)
    set_causal_routing(run.model)
    cfg = load_train_config(RunDir(run_dir).config)
    val = load_prepared(output_dir(cfg.data)).token_stream("val")
    ev = HeldOutEval(val, cfg.model.seq_len, cfg.train.eval_tokens, 1.0, cfg.train.micro_batch_size)
    return ev.run(run.model, torch.device("cpu"))["val_loss"]


def analyse(plan, arms: dict[str, list]) -> dict:
    runs = {a: [analyse_run(r) for r in rs if done(r)] for a, rs in arms.items()}
    r_dir = {r.name: r.run_dir for rs in arms.values() for r in rs}
    dense = runs.get("dense") or []
    ref = st.mean_sd([r["final_val_loss"] for r in dense])["mean"]
    ref_flops = st.mean_sd([r["flops"] for r in dense])["mean"]
    out = {"spec": plan.spec.name, "dense_final_val_loss": ref, "dense_flops": ref_flops, "arms": {}}
    for arm, rs in runs.items():
        if not rs:
            continue
        for r in rs:
            reach = st.flops_to_reach(r["curve"], ref) if ref is not None and arm != "dense" else None
            r["flops_to_reach_dense"] = reach
            r["compute_ratio"] = reach / ref_flops if reach is not None else None
            # Paired with the dense run of the same seed (same data order): seed noise partly cancels.
            twin = next((d for d in dense if d["seed"] == r["seed"]), None)
            if twin is not None and arm != "dense":
                reach = st.flops_to_reach(r["curve"], twin["final_val_loss"])
                r["paired_delta"] = r["final_val_loss"] - twin["final_val_loss"]
                r["paired_compute_ratio"] = reach / twin["flops"] if reach is not None else None
        a = {
            "seeds": [r["seed"] for r in rs],
            "val_loss": st.mean_sd([r["final_val_loss"] for r in rs]),
            "train_loss": st.mean_sd([r["final_loss"] for r in rs]),
            "flops": st.mean_sd([r["flops"] for r in rs]),
            "active_params": rs[0]["active_params"],
            "params": rs[0]["params"],
            "active_non_embedding_params": rs[0]["active_non_embedding_params"],
            "tokens_per_s": st.mean_sd([r["tokens_per_s"] for r in rs]),
            "runs": rs,
        }
        if arm != "dense":
            a["compute_ratio"] = st.mean_sd([r["compute_ratio"] for r in rs])
            a["paired_delta"] = st.mean_sd([r.get("paired_delta") for r in rs])
            a["paired_compute_ratio"] = st.mean_sd([r.get("paired_compute_ratio") for r in rs])
            a["reached"] = sum(r["compute_ratio"] is not None for r in rs)
            for name in KEYS:
                a[name] = st.mean_sd([r[name]["mean"] for r in rs])
                a[name + "_quarters"] = [st.mean_sd([r[name]["quarters"][q] for r in rs])["mean"] for q in range(4)]
            a["experts"] = rs[0]["experts"]
        if arm.startswith("expert_choice"):
            for r in rs:
                r["causal_val_loss"] = causal_val_loss(r_dir[r["run"]])
            a["causal_val_loss"] = st.mean_sd([r["causal_val_loss"] for r in rs])
        out["arms"][arm] = a
    if dense:
        out["dense_curve"] = st.mean_curve([r["curve"] for r in dense])
        out["dense_doublings"] = st.per_doubling_drops(out["dense_curve"])
    return out


def fmt(ms: dict, f: str = ".4f", pct: bool = False) -> str:
    if ms.get("mean") is None:
        return "-"
    m, sd = (100 * ms["mean"], 100 * (ms["sd"] or 0)) if pct else (ms["mean"], ms["sd"])
    return f"{m:{f}}" + (f"±{sd:{f.lstrip('+')}}" if sd is not None and ms["n"] > 1 else "")


def fmt_ratio(ms: dict, n: int) -> str:
    """mean±sd of a compute ratio; '(k/n)' when only k of the n runs reached the loss."""
    if not ms["n"]:
        return "not reached"
    return fmt(ms, ".2f") + "x" + (f" ({ms['n']}/{n})" if ms["n"] < n else "")


def winner_margins(res: dict) -> dict:
    """The causal arm with the lowest mean val loss, and its margin over every other arm: the
    difference of means and the mean±sd of same-seed differences (same data order). expert_choice
    cannot win: its val loss routes over the batch, later tokens included (not causal)."""
    arms = {a: v for a, v in res["arms"].items() if a != "dense"}
    causal = [a for a in arms if not a.startswith("expert_choice")]
    if not causal:
        return {}
    win = min(causal, key=lambda a: arms[a]["val_loss"]["mean"])
    seeds = {r["seed"]: r["final_val_loss"] for r in arms[win]["runs"]}
    out = {"arm": win, "margins": {}}
    for a, v in arms.items():
        if a == win:
            continue
        paired = [r["final_val_loss"] - seeds[r["seed"]] for r in v["runs"] if r["seed"] in seeds]
        out["margins"][a] = {
            "mean_difference": v["val_loss"]["mean"] - arms[win]["val_loss"]["mean"],
            "paired": st.mean_sd(paired),
        }
    print(
        f"\nwinner (lowest mean val loss of the causal routers): {win}; others minus {win}: "
        + "; ".join(
            f"{a} {m['mean_difference']:+.4f} (same seed {fmt(m['paired'], '+.4f')})" for a, m in out["margins"].items()
        )
    )
    return out


def print_table(res: dict) -> None:
    arms = res["arms"]
    print(
        f"\n{res['spec']}: every run {res['dense_flops']:.3e} training "
        f"FLOPs; dense final val loss {res['dense_final_val_loss']:.4f} "
        f"(mean over seeds)"
    )
    hdr = (
        f"{'arm':21s} {'seeds':>5s} {'val loss':>15s} {'vs dense':>16s} {'FLOPs to dense':>14s} {'(paired)':>12s} "
        f"{'imbalance':>9s} {'(Q1/Q4)':>11s} {'dropped':>9s} {'z-loss':>6s} {'util H/lnE':>10s} {'tokens/s':>8s}"
    )
    print(hdr + "\n" + "-" * len(hdr))
    order = ["dense"] + sorted((a for a in arms if a != "dense"), key=lambda a: arms[a]["val_loss"]["mean"])
    for arm in order:
        a = arms[arm]
        n = a["val_loss"]["n"]
        row = f"{arm:21s} {n:5d} {fmt(a['val_loss']):>15s} "
        if arm == "dense":
            row += f"{'-':>16s} {'1':>14s} {'1':>12s} {'-':>9s} {'-':>11s} {'-':>9s} {'-':>6s} {'-':>10s}"
        else:
            q = a["imbalance_quarters"]
            ln_e = math.log(a["experts"]) if a["experts"] > 1 else 1.0
            row += (
                f"{fmt(a['paired_delta'], '+.4f'):>16s} {fmt_ratio(a['compute_ratio'], n):>14s} "
                f"{fmt_ratio(a['paired_compute_ratio'], n):>12s} "
                f"{fmt(a['imbalance'], '.2f'):>9s} {q[0]:5.2f}/{q[3]:<5.2f} "
                f"{fmt(a['dropped_frac'], '.1f', pct=True) + '%':>9s} {a['z_loss']['mean']:6.3f} "
                f"{a['util_entropy']['mean'] / ln_e:10.3f}"
            )
        row += f" {a['tokens_per_s']['mean']:8.0f}"
        print(row)
    ec, d = arms.get("expert_choice"), arms.get("dense")
    if ec and ec.get("causal_val_loss", {}).get("mean") is not None and d:
        c = ec["causal_val_loss"]
        print(
            "expert_choice with causal routing (token-choice top-k "
            "over its probabilities, as generation and lm-eval run it): "
            f"val loss {fmt(c)}, {c['mean'] - d['val_loss']['mean']:+.4f} vs dense"
        )
    print(
        "vs dense: val loss minus the same seed's dense run (mean±sd "
        "over seeds). FLOPs to dense: training FLOPs at which\n"
        "the run's val curve first reaches the dense final val loss "
        "(mean over dense seeds; paired: its own seed's), over\n"
        "the dense run's FLOPs. imbalance: max/mean expert load, "
        "mean over layers and all log records (Q1/Q4: first and\n"
        "last quarter of training). dropped: assignments over "
        "capacity (expert_choice: tokens no expert took), mean over\n"
        "training. z-loss: unweighted router z-loss, mean over "
        "training. util H/lnE: entropy of the expert load over ln E."
    )


def main() -> None:
    if "--paired" in sys.argv:
        from moe_router_protocol import main as paired_main  # the paired-seed protocol (benchmarks/)

        paired_main([a for a in sys.argv[1:] if a != "--paired"])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", default=DEFAULT_SPEC)
    ap.add_argument(
        "--trend", nargs="*", default=DEFAULT_TREND, help="the same study at other sizes (dense + best router)"
    )
    ap.add_argument("--best", type=int, default=2, help="routers that get every seed")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-launch", action="store_true", help="only read finished runs")
    ap.add_argument("--json", help="output (default: <runs of --spec>/router_study.json)")
    args = ap.parse_args()
    os.chdir(REPO)
    log: list[dict] = []
    plan = plan_sweep(args.spec)
    arms: dict[str, list] = {}
    for r in plan.runs:
        arms.setdefault(arm_of(r), []).append(r)
    first = min(r.axes.get("seed", 0) for r in plan.runs)
    first_batch = [r for r in plan.runs if r.axes.get("seed", 0) == first or arm_of(r) == "dense"]
    if not all(done(r) for r in first_batch if arm_of(r) != "dense"):  # rank routers only once each has a run
        launch(args.spec, first_batch, args, log)
        first_batch = []
    ranked = sorted(
        (a for a in arms if a != "dense"),
        key=lambda a: (
            st.mean_sd([st.read_run(r.run_dir)[0]["final_val_loss"] for r in arms[a] if done(r)])["mean"] or 1e9
        ),
    )
    best = ranked[: args.best]
    launch(args.spec, first_batch + [r for a in best for r in arms[a]], args, log)
    res = analyse(plan, arms)
    res["best_routers"], res["launches"] = best, log
    print_table(res)
    res["winner"] = winner_margins(res)
    res["trend"] = trend(args, best[0] if best else None, res, log)
    print_doublings(res)
    out = Path(args.json) if args.json else plan.root / "router_study.json"
    out.write_text(json.dumps(res, indent=1, default=str))
    print(f"\nwrote {out} (load average now {os.getloadavg()[0]:.1f})")


def trend(args, router: str | None, main_res: dict, log: list) -> dict:
    """The compute ratio of the best router at each size (this spec and the --trend specs)."""
    rows = []
    for spec in args.trend:
        if not router or not Path(spec).exists():
            continue
        plan = plan_sweep(spec)
        first = min(r.axes.get("seed", 0) for r in plan.runs)
        arms = {
            "dense": [r for r in plan.runs if arm_of(r) == "dense" and r.axes.get("seed", 0) == first],
            router: [r for r in plan.runs if arm_of(r) == router and r.axes.get("seed", 0) == first],
        }
        launch(spec, arms["dense"] + arms[router], args, log)
        res = analyse(plan, arms)
        if router in res["arms"] and "dense" in res["arms"]:
            rows.append(res)
    rows.append(main_res)
    points = []
    print(
        f"\nsize trend, {router}: compute to reach the dense final loss (x dense FLOPs; target <= {TARGET}); "
        "N = active non-embedding parameters of the dense model"
    )
    for res in sorted(rows, key=lambda x: x["arms"]["dense"]["active_params"]):
        a, d = res["arms"].get(router), res["arms"]["dense"]
        if a is None:
            continue
        ratio, n = a["compute_ratio"]["mean"], d["active_non_embedding_params"]
        points.append((n, ratio))
        print(
            f"  {res['spec']:22s} N {n:>9,d}  seeds "
            f"{d['val_loss']['n']}/{a['val_loss']['n']}  FLOPs {d['flops']['mean']:.2e}  "
            f"dense {d['val_loss']['mean']:.4f}  {router} {a['val_loss']['mean']:.4f} "
            f"({a['val_loss']['mean'] - d['val_loss']['mean']:+.4f})"
            f"  ratio {'not reached' if ratio is None else f'{ratio:.2f}x'}"
        )
    cross = st.trend_crossing(points, TARGET)
    if cross["n_at_target"] and cross["slope_per_decade"] < 0:
        print(
            f"  least-squares line in log10 N: {cross['slope_per_decade']:+.3f} "
            f"per decade; {TARGET}x at N ~ {cross['n_at_target']:.3g}"
        )
    return {
        "router": router,
        "sizes": [{"spec": r["spec"], "dense": r["arms"]["dense"], router: r["arms"].get(router)} for r in rows],
        "crossing": cross,
    }


def print_doublings(res: dict) -> None:
    rows = res.get("dense_doublings") or []
    if not rows:
        return
    print(f"\ndense val loss fall per doubling of tokens (mean over seeds), {res['spec']}:")
    print(
        "  "
        + "  ".join(f"{r['tokens'] / 1e6:.2f}M {r['drop_per_doubling']:.3f}" for r in rows[:: max(1, len(rows) // 8)])
    )


if __name__ == "__main__":
    main()
