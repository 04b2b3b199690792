"""Build dashboard inputs with the real producers: a tiny sweep (`scalelab train`), an MoE run, a
`wsd` sweep (a stable run and two cooldown branches, `scalelab sweep launch`), an evaluation (`scalelab eval`)
and fit records (`scalelab fit`), plus deliberately broken dirs.

Used by the browser tests (once per session) and to make the docs' screenshots:
    python -m dashboard.demo.build OUT_DIR        # -> OUT_DIR/runs, OUT_DIR/fits
Each producer is a `scalelab` command run as its own process; `make(..., runner=)` takes another way to run one
(the browser tests run them inside the test process, as the suite runs the CLI elsewhere).
The fits are fitted by `scalelab fit` on SYNTHETIC data (a 3-run CPU sweep is too small to fit a
5-parameter law): IsoFLOP / batch-lr tables from scaling.synthetic.runs, and MoE tables, a run tree
with task evaluations and lr-schedule curves from dashboard.demo.data; the runs, metrics, MoE
router statistics and eval results are real.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import scaling.synthetic.runs as syn
from dashboard.demo import data as demo_data
from rundir.layout import RunDir
from rundir.write import write_run

REPO = Path(__file__).resolve().parents[2]
TINY = [("n50k-lr3e-3", "n50k", 3e-3), ("n50k-lr1e-2", "n50k", 1e-2), ("n100k-lr3e-3", "n100k", 3e-3)]
BROKEN = {  # rundir.write.write_run's parts, written as they are
    "tiny-sweep/broken-summary": {"summary": '{"status": "done", "tokens": '},
    "tiny-sweep/torn-config": {"config": "model: [unclosed\n  : - x", "summary": "[1, 2]"},
}


def _scalelab() -> list[str]:
    exe = Path(sys.executable).with_name("scalelab")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "launch.cli"]


def _env() -> dict:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
    }


# Runs `scalelab ARGS` in the checkout with the environment `_env()` gives; returns (exit code, output).
Runner = Callable[[list[str], dict], tuple[int, str]]


def run_process(args: list[str], env: dict) -> tuple[int, str]:
    """The default runner: `scalelab ARGS` as a process of its own."""
    r = subprocess.run(
        _scalelab() + args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    return r.returncode, r.stdout


def _run(args: list[str], log, done: Path | None = None, runner: Runner = run_process) -> None:
    if done is not None and done.exists():  # reuse an existing demo tree (e.g. SCALELAB_DASHBOARD_DEMO)
        return
    code, out = runner(args, _env())
    log.write(f"$ scalelab {' '.join(args)}\n{out}\n")
    if code != 0:
        raise RuntimeError(f"scalelab {' '.join(args[:2])} failed ({code}):\n{out[-3000:]}")


def train_args(run_dir: Path, data_dir: Path, steps: int = 20) -> list[str]:
    return [
        f"train.tokens={steps * 8 * 64}",
        "train.micro_batch_size=8",
        "train.global_batch_size=8",
        "train.log_every_steps=2",
        "train.eval_every_steps=10",
        "train.eval_tokens=2048",
        f"train.checkpoint_every_steps={steps}",
        "train.threads=1",
        "wandb.mode=disabled",
        "data.tokenizer.vocab_size=512",
        "data.name=tiny512",
        f"data.out_dir={data_dir}",
        "model.seq_len=64",
        "--run-dir",
        str(run_dir),
    ]


def make(
    out: str | Path,
    *,
    moe: bool = True,
    evals: bool = True,
    fits: bool = True,
    broken: bool = True,
    wsd: bool = True,
    runner: Runner = run_process,
) -> dict:
    """Create OUT/runs and OUT/fits; returns what was produced (paths and run ids). `runner` runs each
    `scalelab` command (default: a process of its own)."""
    out = Path(out).resolve()
    runs, fdir, data = out / "runs", out / "fits", out / "data"
    runs.mkdir(parents=True, exist_ok=True)
    fdir.mkdir(parents=True, exist_ok=True)
    made = {"runs": runs, "fits": fdir, "ids": [], "broken": [], "fit_ids": []}
    with open(out / "producers.log", "a") as log:
        for name, model, lr in TINY:
            _run(
                [
                    "train",
                    "configs/train/tiny.yaml",
                    f"model={model}",
                    f"optim.lr={lr}",
                    *train_args(runs / "tiny-sweep" / name, data),
                ],
                log,
                RunDir(runs / "tiny-sweep" / name).summary,
                runner,
            )
            made["ids"].append(f"tiny-sweep/{name}")
        if moe:
            _run(
                [
                    "train",
                    "configs/train/tiny-moe.yaml",
                    "model.preset=n50k",
                    "model.moe.d_ff=64",
                    *train_args(runs / "tiny-moe" / "moe-n50k", data),
                ],
                log,
                RunDir(runs / "tiny-moe" / "moe-n50k").summary,
                runner,
            )
            made["ids"].append("tiny-moe/moe-n50k")
            _run(
                [
                    "train",
                    "configs/train/tiny-moe.yaml",
                    "model.preset=n50k",
                    "model.moe.d_ff=64",
                    "model.moe.router=aux_free_bias",
                    "model.moe.capacity_factor=null",
                    *train_args(runs / "tiny-moe" / "moe-n50k-auxfree", data),
                ],
                log,
                RunDir(runs / "tiny-moe" / "moe-n50k-auxfree").summary,
                runner,
            )
            made["ids"].append("tiny-moe/moe-n50k-auxfree")
        if wsd:  # a stable run and its cooldown branches (the Curves view draws them as one family)
            spec = demo_data.wsd_spec(out / "wsd-demo.yaml", runs / "wsd-demo", data)
            ids = [f"wsd-demo/{name}" for name in demo_data.WSD_RUNS]
            if not all(RunDir(runs / rid).summary.exists() for rid in ids):
                _run(["sweep", "launch", str(spec), "--workers", "2", "--no-progress"], log, None, runner)
            made["ids"] += ids
            made["wsd"] = {f"wsd-demo/{n}": (p and (f"wsd-demo/{p[0]}", p[1])) for n, p in demo_data.WSD_RUNS.items()}
        if evals:
            tasks = "blimp_anaphor_gender_agreement,blimp_anaphor_number_agreement,blimp_determiner_noun_agreement_1"
            for rid in made["ids"][:3:2]:  # n50k-lr3e-3 and n100k-lr3e-3
                _run(
                    [
                        "eval",
                        str(runs / rid),
                        "--suite",
                        "tiny",
                        "--tasks",
                        tasks,
                        "--limit",
                        "20",
                        "--device",
                        "cpu",
                        "--threads",
                        "1",
                        "--no-wandb",
                        "--batch-size",
                        "64",
                    ],
                    log,
                    RunDir(runs / rid).evals,
                    runner,
                )
        if fits:
            made["fit_ids"] = _fits(fdir, log, runner)
    if broken:
        for rid, parts in BROKEN.items():
            write_run(runs / rid, **parts)
            made["broken"].append(rid)
    return made


def _fits(fdir: Path, log, runner: Runner) -> list[str]:
    """Fit records made by `scalelab fit` on synthetic tables and run trees kept under the fits root
    (the dashboard reads a record's source only inside its roots; run trees there are not records)."""

    tables = fdir / "data"
    tables.mkdir(exist_ok=True)
    inputs = {
        "isoflop_synthetic.csv": lambda p: syn.chinchilla_table(budgets=(1e15, 1e16, 1e17), n_per_budget=7).to_csv(
            p, index=False
        ),
        "batch_lr_synthetic.csv": lambda p: syn.batch_lr_sweep(
            budgets=(1e15, 1e16, 1e17), lr_mults=(0.25, 0.5, 1, 2, 4), bs_mults=(0.5, 1, 2)
        ).to_csv(p, index=False),
        "isoflop_by_optimizer.csv": demo_data.optimizer_table,
        "moe_synthetic.csv": demo_data.moe_table,
        "moe_clark_synthetic.csv": demo_data.clark_table,
        "annealing_synthetic.csv": demo_data.annealing_table,
        "chain-runs": demo_data.chain_runs,
    }
    for name, write in inputs.items():
        if not (tables / name).exists():
            write(tables / name)
    t = {name: str(tables / name) for name in inputs}
    fits = {
        "chinchilla-a3.json": [
            "chinchilla",
            t["isoflop_synthetic.csv"],
            "--approach",
            "3",
            "--bootstrap",
            "8",
            "--top-k",
            "8",
            "--compute",
            "1e19",
        ],
        "chinchilla-a2.json": ["chinchilla", t["isoflop_synthetic.csv"], "--approach", "2"],
        "batch-lr.json": ["batch-lr", t["batch_lr_synthetic.csv"]],
        "chinchilla-by-optimizer.json": [
            "chinchilla",
            t["isoflop_by_optimizer.csv"],
            "--by",
            "optimizer",
            "--bootstrap",
            "8",
            "--top-k",
            "8",
        ],
        "moe-krajewski.json": ["moe", t["moe_synthetic.csv"], "--bootstrap", "8", "--compute", "1e21"],
        "moe-clark.json": ["moe", t["moe_clark_synthetic.csv"], "--law", "clark"],
        "task-loss.json": ["task-loss", t["chain-runs"], "--bootstrap", "8"],
        "accuracy.json": ["accuracy", t["chain-runs"], "--bootstrap", "20"],
        "lr-annealing.json": [
            "lr-annealing",
            t["annealing_synthetic.csv"],
            "--holdout",
            "last-run",
            "--bootstrap",
            "8",
        ],
    }
    for out, args in fits.items():
        _run(["fit", *args, "--out", str(fdir / out)], log, fdir / out, runner)
    (fdir / "not-a-fit.json").write_text('{"law": "chinchilla", "par')
    return sorted(fits)


def main(argv: list[str] | None = None) -> int:

    ap = argparse.ArgumentParser(prog="python -m dashboard.demo.build", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "out",
        nargs="?",
        default="dashboard-demo",
        help="folder to fill: OUT/runs, OUT/fits (default: dashboard-demo); what is already there is kept",
    )
    ap.add_argument("--no-moe", action="store_true", help="skip the MoE training runs")
    ap.add_argument("--no-evals", action="store_true", help="skip `scalelab eval`")
    ap.add_argument("--no-fits", action="store_true", help="skip the fit records")
    ap.add_argument("--no-wsd", action="store_true", help="skip the wsd sweep (a stable run and its branches)")
    args = ap.parse_args(argv)
    res = make(args.out, moe=not args.no_moe, evals=not args.no_evals, fits=not args.no_fits, wsd=not args.no_wsd)
    print(json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in res.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
