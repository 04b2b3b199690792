"""Acceptance check of the lr-annealing law: fit a constant-lr and a WSD run, predict a cosine run.

    python benchmarks/lr_annealing_check.py    # the defaults below (3 runs, ~5 min each on one busy core)
    python benchmarks/lr_annealing_check.py --steps 1500 --batch 16 --lambda 0.999 --lambda 0.99 --lambda auto

End to end through the CLI, as a user would: `scalelab data prepare` (the bundled default corpus,
512-token BPE), three `scalelab train` runs of one model with the same peak lr, warmup, batch and
tokens (`schedule.name` constant, wsd, cosine; the trainer's defaults: WSD decays linearly over the
last 20% of steps, cosine and WSD to 0.1 x peak), `scalelab fit lr-annealing` on the constant and
WSD runs (training loss over each log window, and val_loss at each evaluation), then `scalelab
predict-curve` on the cosine run's own config. It prints the cosine run's measured final losses
next to the predictions (the training loss as metrics.jsonl logs it: its last log window; the
val loss: the law at the last step), their errors and intervals, the fitted parameters, wall
times and the machine's load. Runs already done in --work are reused (`scalelab train` is idempotent).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from scaling.fits.record import FitRecord

ROOT = Path(__file__).resolve().parents[1]
SCALELAB = [sys.executable, "-m", "launch.cli"]


def sh(args: list[str], **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    r = subprocess.run(SCALELAB + args, cwd=ROOT, env=env, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"scalelab {' '.join(args)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return r


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=str(ROOT / "out" / "lr_annealing_check"), help="runs, data and fits go here")
    ap.add_argument("--model", default="n50k")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4, help="sequences per step")
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--lr", type=float, default=3e-3, help="peak lr of all three runs")
    ap.add_argument("--warmup-steps", type=int, default=300, help="(the trainer's default 5%% of 6,000 steps)")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-tokens", type=int, default=65536)
    ap.add_argument("--bootstrap", type=int, default=100, help="bootstrap resamples of the fit (whole curves)")
    ap.add_argument(
        "--lambda",
        dest="lams",
        action="append",
        help="decay factor(s) to fit with, a number or auto (repeatable; default: 0.999 and auto)",
    )
    ap.add_argument(
        "--skip-fraction",
        type=float,
        default=0.1,
        help="passed to fit lr-annealing (default 0.1: the setting the numbers in docs/scaling-laws.md were "
        "measured with; the fit's own default is 0)",
    )
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress shows while the runs train
    lams = args.lams or ["0.999", "auto"]
    work = Path(args.work)
    data = work / "data"
    t0 = time.perf_counter()
    sh(
        [
            "data",
            "prepare",
            str(ROOT / "configs/data/default.yaml"),
            "tokenizer.vocab_size=512",
            "name=default512",
            "--out",
            str(data),
        ]
    )
    common = [
        f"model={args.model}",
        f"model.seq_len={args.seq_len}",
        "data=default",
        "data.tokenizer.vocab_size=512",
        "data.name=default512",
        f"data.out_dir={data}",
        "train.tokens=null",
        f"train.steps={args.steps}",
        f"train.micro_batch_size={args.batch}",
        f"train.global_batch_size={args.batch}",
        f"train.log_every_steps={args.log_every}",
        f"train.eval_every_steps={args.eval_every}",
        f"train.eval_tokens={args.eval_tokens}",
        "train.checkpoint_every_steps=0",
        "train.threads=1",
        "wandb.mode=disabled",
        f"optim.lr={args.lr}",
        f"schedule.warmup_steps={args.warmup_steps}",
    ]
    print(
        f"# lr-annealing acceptance: {args.model}, seq {args.seq_len}, batch {args.batch}, {args.steps} steps "
        f"({args.steps * args.batch * args.seq_len:,} tokens), peak "
        f"lr {args.lr}, warmup {args.warmup_steps}; load {load()}"
    )
    runs = {"constant": work / "fit" / "constant", "wsd": work / "fit" / "wsd", "cosine": work / "target" / "cosine"}
    wall = {}
    for name, rd in runs.items():
        t = time.perf_counter()
        sh(
            [
                "train",
                str(ROOT / "configs/train/tiny.yaml"),
                *common,
                f"schedule.name={name}",
                "--run-dir",
                str(rd),
                "--no-progress",
            ]
        )
        s = json.loads((rd / "summary.json").read_text())
        wall[name] = s["wall_s"]
        print(
            f"{name:>9}: final loss {s['final_loss']:.4f}, val loss {s['final_val_loss']:.4f}, params {s['params']:,}, "
            f"{s['wall_s']:.0f} s training ({time.perf_counter() - t:.0f} s this call); load {load()}"
        )
    target = json.loads((runs["cosine"] / "summary.json").read_text())
    cfg = str(runs["cosine"] / "config.yaml")
    print()
    for lam in lams:
        for metric, measured_key, pred_key in (
            ("loss", "final_loss", "final_logged_loss"),
            ("val_loss", "final_val_loss", "final_loss"),
        ):
            fit = work / f"fit-{metric}-{lam}.json"
            sh(
                [
                    "fit",
                    "lr-annealing",
                    str(work / "fit"),
                    "--metric",
                    metric,
                    "--lambda",
                    str(lam),
                    "--skip-fraction",
                    str(args.skip_fraction),
                    "--bootstrap",
                    str(args.bootstrap),
                    "--out",
                    str(fit),
                ]
            )
            rec = FitRecord.load(fit)
            pred = json.loads(
                sh(["predict-curve", str(fit), cfg, "--json", "--out", str(work / f"cosine-{metric}-{lam}.csv")]).stdout
            )
            measured, predicted = target[measured_key], pred[pred_key]
            err = predicted / measured - 1
            iv = pred["final_loss_interval"]
            p, ivs = rec["params"], rec.get("intervals") or {}
            chosen = f" (chose {rec['settings']['lambda']:g})" if lam == "auto" else ""
            print(
                f"lambda {lam}{chosen}, fitted on {metric}: cosine {measured_key} "
                f"measured {measured:.4f}, predicted {predicted:.4f} "
                f"({err:+.2%}); law at the last step {pred['final_loss']:.4f}"
                + (f" [{iv[0]:.4f}, {iv[1]:.4f}]" if iv else "")
            )
            print(
                "    "
                + ", ".join(
                    f"{k} = {p[k]:.4g}" + (f" [{ivs[k][0]:.4g}, {ivs[k][1]:.4g}]" if k in ivs else "")
                    for k in ("L0", "A", "alpha", "C")
                )
                + f"; {rec['n_points']} points, log rms residual {rec['diagnostics']['residual_log_rms']:.3g}"
            )
            for w in rec["warnings"] + pred["warnings"]:
                print(f"    warning: {w}")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; training wall {sum(wall.values()):.0f} s; load {load()}")


if __name__ == "__main__":
    main()
