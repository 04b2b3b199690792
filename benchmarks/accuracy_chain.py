"""Acceptance check of the loss-to-accuracy chain on real tiny runs: predict the largest models'
accuracies from laws fitted on the smaller ones, and count how many fall in the intervals.

Steps (each skippable when already done):
1. train the ladder `configs/sweeps/accuracy-chain-tiny.yaml` (`scalelab sweep launch`);
2. evaluate every run on the tiny suite (`scalelab sweep eval --suite tiny --limit 1000`): eight
   whole BLiMP subsets, 1,000 LAMBADA documents, TinyShakespeare bits per byte; each
   multiple-choice/loglikelihood task records its gold continuation's bits per byte (`gold_bpb`)
   beside its accuracy;
3. hold out every run of the largest model size; on the others fit, per task, the task-loss law
   L_task(N, D) (OLMo step 1, `fit_task_loss`) and the sigmoid Acc(L_task) (step 2, `fit_accuracy`),
   both bootstrapped over runs;
4. for each held-out run and task, chain the two (`scaling.planning.accuracy_chain.predict_chain`) and
   compare the predicted accuracy and its 95% prediction interval with the measured accuracy.
Tasks whose accuracies sit at chance are reported too (their sigmoid carries no signal).

    .venv/bin/python benchmarks/accuracy_chain.py [--skip-train] [--skip-eval] [--limit 1000] [--bootstrap 200] \
        [--json out.json]

The machine is shared: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SPEC = ROOT / "configs/sweeps/accuracy-chain-tiny.yaml"


def cli(*args: str) -> None:
    cmd = [sys.executable, "-m", "launch.cli", *args]
    print("$ scalelab " + " ".join(args), flush=True)
    r = subprocess.run(cmd, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"`scalelab {' '.join(args)}` exited {r.returncode}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--spec", default=str(SPEC), help="the ladder's sweep spec (default: configs/sweeps/accuracy-chain-tiny.yaml)"
    )
    ap.add_argument("--runs", help="its run-directory tree (default: runs/<spec name>)")
    ap.add_argument("--suite", default="tiny")
    ap.add_argument(
        "--limit",
        type=int,
        default=1000,
        help="documents per task (BLiMP has 1,000 each; default 1000: the whole BLiMP subsets)",
    )
    ap.add_argument("--force", action="store_true", help="evaluate runs again that already have results of the suite")
    ap.add_argument(
        "--workers", type=int, help="local training / evaluation processes (default: the spec's executor.local.workers)"
    )
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--skip-eval", action="store_true")
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--ci", type=float, default=0.95)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write every prediction here")
    args = ap.parse_args(argv)

    import yaml

    spec = yaml.safe_load(Path(args.spec).read_text())
    runs = Path(args.runs or ROOT / "runs" / spec["name"])
    t0 = time.perf_counter()
    workers = ["--workers", str(args.workers)] if args.workers else []
    if not args.skip_train:
        cli("sweep", "launch", args.spec, "--executor", "local", *workers)
    if not args.skip_eval:
        cli(
            "sweep",
            "eval",
            args.spec,
            "--suite",
            args.suite,
            "--limit",
            str(args.limit),
            *workers,
            *(["--force"] if args.force else []),
        )

    from scaling.data.eval_points import read_eval_points
    from scaling.fits.accuracy import fit_accuracy
    from scaling.fits.task_loss import fit_task_loss
    from scaling.planning.accuracy_chain import predict_chain

    df, warnings = read_eval_points(runs)
    for w in warnings:
        print(f"note: {w}")
    n_max = df["N"].max()
    held, train = df[df["N"] == n_max], df[df["N"] < n_max]
    print(
        f"\n{df['run'].nunique()} evaluated runs under {runs}; fitting on {train['run'].nunique()} (N < {n_max:.3g}), "
        f"predicting the {held['run'].nunique()} runs of the largest size (N = {n_max:.3g})"
    )
    cols = [
        "N",
        "D",
        "loss",
        "task",
        "run",
        "params",
        "non_embedding_params",
        "flops_per_token",
        "flops",
        "unique_tokens",
        "epochs",
        "path",
    ]
    tl = fit_task_loss(
        train[[c for c in cols if c in train.columns]], bootstrap=args.bootstrap, seed=args.seed, ci=args.ci
    )
    acc_tasks = sorted(set(train.loc[train["acc"].notna(), "task"]))
    acc = fit_accuracy(
        train[train["acc"].notna()][["loss", "acc", "task", "chance"]],
        bootstrap=args.bootstrap,
        seed=args.seed,
        ci=args.ci,
    )
    for name, w in (("task-loss", tl["warnings"]), ("accuracy", acc["warnings"])):
        for x in w:
            print(f"{name} fit warning: {x}")

    rows = []
    print(
        f"\n{'task':44} {'run':14} {'gold_bpb':>8} {'predicted [95%]':>24} "
        f"{'acc':>6} {'predicted [95%]':>22} {'in':>3} {'chance':>6}"
    )
    for task in acc_tasks:
        if task not in tl["tasks"]:
            continue
        for r in held[held["task"] == task].sort_values("D").to_dict("records"):
            pred = predict_chain(acc, r["N"], r["D"], task_loss=tl, ci=args.ci, seed=args.seed)["tasks"][task]
            lo, hi = pred["interval"]
            llo, lhi = pred["task_loss_interval"]
            inside = bool(lo <= r["acc"] <= hi)
            rows.append(
                {
                    "task": task,
                    "run": r["run"],
                    "N": r["N"],
                    "D": r["D"],
                    "gold_bpb": r["loss"],
                    "pred_gold_bpb": pred["task_loss"],
                    "gold_bpb_interval": [llo, lhi],
                    "acc": r["acc"],
                    "pred_acc": pred["acc"],
                    "acc_interval": [lo, hi],
                    "inside": inside,
                    "loss_inside": bool(llo <= r["loss"] <= lhi),
                    "chance": r.get("chance"),
                    "n_docs": r.get("n_docs"),
                    "fit_warnings": [w for w in acc["warnings"] if w.startswith(f"{task}:")],
                }
            )
            print(
                f"{task:44} {Path(r['run']).name:14} {r['loss']:8.4f} "
                f"{pred['task_loss']:8.4f} [{llo:6.4f}, {lhi:6.4f}] "
                f"{r['acc']:6.3f} {pred['acc']:6.3f} [{lo:5.3f}, {hi:5.3f}] {'yes' if inside else 'NO':>3} "
                f"{r['chance'] if r.get('chance') is not None else float('nan'):6.2f}"
            )
    n_in = sum(r["inside"] for r in rows)
    n_loss_in = sum(r["loss_inside"] for r in rows)
    # a sigmoid fitted to accuracies at chance or flat says nothing: count those pairs apart
    mute = [r for r in rows if any("of chance" in w or "the fit is flat" in w for w in r["fit_warnings"])]
    signal = [r for r in rows if r not in mute]
    load = os.getloadavg()
    print(
        f"\naccuracy inside its {args.ci:.0%} interval: {n_in} of {len(rows)} held-out (run, task) pairs; "
        f"{sum(r['inside'] for r in signal)} of {len(signal)} where the accuracy fit has signal, "
        f"{sum(r['inside'] for r in mute)} of {len(mute)} where it is at chance or flat "
        f"({', '.join(sorted({r['task'] for r in mute})) or 'none'})"
    )
    print(f"gold bits per byte inside its interval: {n_loss_in} of {len(rows)}")
    print(f"load average {load[0]:.2f} on {os.cpu_count()} CPUs; {time.perf_counter() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "rows": rows,
                    "inside": n_in,
                    "total": len(rows),
                    "loss_inside": n_loss_in,
                    "held_out_N": n_max,
                    "loadavg": load,
                    "task_loss_warnings": tl["warnings"],
                    "accuracy_warnings": acc["warnings"],
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
