"""Sweep launcher overhead (issue 5 benchmark). Targets: < 1 s of overhead per run, and
`sweep status` over 1,000 run dirs in < 2 s.

Measures, on this machine:
 1. plan + submit + status over a 200-run spec (submit = launch configs + sbatch of a *held*
    job array that is cancelled right after, when Slurm is up; otherwise the dry-run render);
 2. a local sweep of 8 trivial trainings (2 workers; trainers forked by the warm starter) against
    the same sweep with `executor.local.warm_start: false` (each trainer a new process) and the
    same 8 trainings started directly with `python -m pretrain.cli`, 2 at a time;
 3. status over 1,000 synthetic run directories (mixed states).

    .venv/bin/python benchmarks/sweep_overhead.py [--skip-local] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def write_base(folder: Path, data: Path, steps: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {
        "model": {"preset": "n50k", "seq_len": 64},
        "data": {
            "name": "bench-v512",
            "sources": ["corpus/tinyshakespeare.txt"],
            "tokenizer": {"kind": "bpe", "vocab_size": 512},
            "out_dir": str(data),
        },
        "train": {
            "steps": steps,
            "micro_batch_size": 4,
            "global_batch_size": 4,
            "log_every_steps": 2,
            "eval_every_steps": 0,
            "eval_tokens": 512,
            "checkpoint_every_steps": 0,
        },
        "deepspeed": {"zero_stage": 0},
        "wandb": {"mode": "disabled"},
    }
    p = folder / "base.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def spec_file(folder: Path, name: str, base: Path, axes: dict, runs: Path, **extra) -> Path:
    p = folder / f"{name}.yaml"
    p.write_text(
        yaml.safe_dump({"name": name, "base": str(base), "kind": "grid", "axes": axes, "runs_dir": str(runs), **extra})
    )
    return p


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def bench_200(work: Path, base: Path) -> dict:
    from launch.executors.slurm import SlurmExecutor, queued_jobs, render_script
    from launch.sweep.expand import plan
    from launch.sweep.status import sweep_status

    spec = spec_file(
        work,
        "b200",
        base,
        {"train.seed": list(range(20)), "optim.lr": [1e-3 * (i + 1) for i in range(10)]},
        work / "runs-200",
        executor={"slurm": {"extra": ["--hold"], "cpus_per_task": 1}},
    )
    t_plan, p = timed(lambda: plan(spec))
    real = bool(shutil.which("sbatch")) and subprocess.run(["sinfo", "-h"], capture_output=True).returncode == 0
    if real:
        t_submit, res = timed(lambda: SlurmExecutor(p.spec).launch(p.runs))
        t_status, sts = timed(lambda: sweep_status(p, queued_jobs(p.root)))
        subprocess.run(["scancel", res["job_id"]], check=False)
        how = f"sbatch of a held 200-task array (job {res['job_id']}, cancelled)"
    else:
        t_submit, _ = timed(lambda: render_script(p.spec, [r.run_dir for r in p.runs], work / "m.txt"))
        t_status, sts = timed(lambda: sweep_status(p, None))
        how = "dry-run render (Slurm not up)"
    n = len(p.runs)
    return {
        "runs": n,
        "plan_s": t_plan,
        "submit_s": t_submit,
        "status_s": t_status,
        "submit_how": how,
        "per_run_s": (t_plan + t_submit + t_status) / n,
        "queued": sum(s.state == "queued" for s in sts),
    }


def bench_local(work: Path, base: Path) -> dict:
    spec = spec_file(work, "l8", base, {"train.seed": list(range(8))}, work / "runs-l8")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    t_sweep, r = timed(
        lambda: subprocess.run(
            [sys.executable, "-m", "launch.cli", "sweep", "launch", str(spec), "--workers", "2", "--no-progress"],
            cwd=work,
            capture_output=True,
            text=True,
            env=env,
        )
    )
    assert r.returncode == 0, r.stdout + r.stderr
    cold = spec_file(
        work,
        "l8cold",
        base,
        {"train.seed": list(range(8))},
        work / "runs-l8cold",
        executor={"local": {"warm_start": False}},
    )
    t_cold, r = timed(
        lambda: subprocess.run(
            [sys.executable, "-m", "launch.cli", "sweep", "launch", str(cold), "--workers", "2", "--no-progress"],
            cwd=work,
            capture_output=True,
            text=True,
            env=env,
        )
    )
    assert r.returncode == 0, r.stdout + r.stderr
    # The same 8 trainings started directly, 2 at a time, same threads.
    launch_cfgs = sorted((work / "runs-l8").glob("*/launch.yaml"))
    direct = work / "runs-direct"

    def run_direct():
        queue = list(launch_cfgs)
        running = []
        while queue or running:
            while queue and len(running) < 2:
                cfg = queue.pop(0)
                running.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "pretrain.cli",
                            str(cfg),
                            "train.threads=1",
                            "--run-dir",
                            str(direct / cfg.parent.name),
                        ],
                        cwd=work,
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            time.sleep(0.05)
            for p in list(running):
                if p.poll() is not None:
                    assert p.returncode == 0
                    running.remove(p)

    t_direct, _ = timed(run_direct)
    t_relaunch, _ = timed(
        lambda: subprocess.run(
            [sys.executable, "-m", "launch.cli", "sweep", "launch", str(spec), "--no-progress"],
            cwd=work,
            capture_output=True,
            env=env,
        )
    )
    return {
        "runs": 8,
        "sweep_s": t_sweep,
        "cold_sweep_s": t_cold,
        "direct_s": t_direct,
        "overhead_per_run_s": (t_sweep - t_direct) / 8,
        "ratio": t_sweep / t_direct,
        "relaunch_all_done_s": t_relaunch,
    }


def bench_status_1000(work: Path, base: Path) -> dict:
    from launch.executors.slurm import queued_jobs
    from launch.sweep.expand import plan
    from launch.sweep.status import counts, sweep_status

    spec = spec_file(
        work,
        "s1000",
        base,
        {"train.seed": list(range(100)), "optim.lr": [1e-3 * (i + 1) for i in range(10)]},
        work / "runs-1000",
    )
    p = plan(spec)
    for i, r in enumerate(p.runs):
        d = Path(r.run_dir)
        kind = i % 4
        if kind == 3:
            continue  # pending
        d.mkdir(parents=True)
        (d / "config.yaml").write_text(f"name: {r.name}\nextras:\n  run_id: {r.id}\n")
        (d / "metrics.jsonl").write_text(
            "".join(json.dumps({"step": s, "loss": 5.0}) + "\n" for s in range(1, r.steps + 1))
        )
        if kind == 2:
            (d / "checkpoints" / "step_6").mkdir(parents=True)
            (d / "checkpoints" / "step_6" / "COMPLETE").write_text("{}")
        else:
            (d / "summary.json").write_text(
                json.dumps(
                    {
                        "status": "done" if kind == 0 else "failed",
                        "steps": r.steps,
                        "total_steps": r.steps,
                        "final_loss": 5.0,
                        "extras": {"run_id": r.id},
                    }
                )
            )
    t_scan, sts = timed(lambda: sweep_status(p, queued_jobs(p.root)))
    t_cli, r = timed(
        lambda: subprocess.run(
            [sys.executable, "-m", "launch.cli", "sweep", "status", str(spec)], capture_output=True, text=True
        )
    )
    from rundir.read import load_runs

    t_reg, (df, problems) = timed(lambda: load_runs(p.root))
    return {
        "runs": len(p.runs),
        "scan_s": t_scan,
        "cli_s": t_cli,
        "registry_s": t_reg,
        "states": counts(sts),
        "registry_rows": len(df),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", help="keep files here (default: a temp dir, removed)")
    ap.add_argument("--skip-local", action="store_true", help="skip the 8-training local comparison")
    a = ap.parse_args()
    work = Path(a.workdir or tempfile.mkdtemp(prefix="sweep-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        base = write_base(work / "base", work / "data", steps=4)
        print(f"workdir {work}")
        b = bench_200(work, base)
        print(
            f"[200-run spec] plan {b['plan_s']:.2f}s, submit {b['submit_s']:.2f}s ({b['submit_how']}), "
            f"status {b['status_s']:.2f}s -> {b['per_run_s'] * 1000:.1f} ms per run (target < 1000 ms); "
            f"{b['queued']} shown queued"
        )
        s = bench_status_1000(work, base)
        print(
            f"[status, 1,000 run dirs] scan {s['scan_s']:.3f}s, CLI incl. interpreter start {s['cli_s']:.2f}s "
            f"(target < 2 s); registry load_runs {s['registry_s']:.2f}s "
            f"({s['registry_rows']} rows); states {s['states']}"
        )
        if not a.skip_local:
            from pretrain.config.loader import load_train_config
            from pretrain.data.prepare import prepare

            prepare(load_train_config(base).data, log=lambda m: None)
            l8 = bench_local(work, base)
            print(
                f"[local, 8 trivial runs, 2 workers] sweep {l8['sweep_s']:.1f}s (warm start), "
                f"{l8['cold_sweep_s']:.1f}s (warm_start: false) vs direct {l8['direct_s']:.1f}s -> "
                f"overhead {l8['overhead_per_run_s']:+.2f}s per run, ratio {l8['ratio']:.2f}x, "
                f"warm/cold {l8['sweep_s'] / l8['cold_sweep_s']:.2f}; "
                f"relaunch with all done {l8['relaunch_all_done_s']:.2f}s"
            )
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
