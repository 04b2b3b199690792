"""Several `scalelab train` runs on the same two ranks, in one `deepspeed --num_gpus 2` launch.

A 2-rank launch pays the launcher's and both ranks' start-up (Python, torch, DeepSpeed: ~14 s of
the ~16 s a tiny 2-rank test took on the 2-core CI machine); the training itself is a second or
two. Each rank here runs the jobs one after another in its own process, each through
`pretrain.cli.main` exactly as `deepspeed --module pretrain.cli` would run it, so the start-up is
paid once per launch, not once per run.

    launch(jobs, cwd) -> [result per job]                    # from a test
    deepspeed --num_gpus 2 tests/helpers/ranks.py JOBS.json   # what it runs

Test modules also register the 2-rank runs they only read (`two_rank_group`); the first test that
asks for the `two_rank_runs` fixture (tests/conftest.py) trains every registered run in one launch
(`train_groups`), so the launcher's and the ranks' start-up is paid once per session.

A job: {"argv": [train args], "env": {...}, "copy": [src, dst], "remove": [paths]}: rank 0 copies
and removes (paths relative to `cwd`) before the job while rank 1 waits for it (a file marks each
job ready: both ranks read the run directory before they meet). Each job gets a fresh
MASTER_PORT: a store re-created on the port of the previous job's can hang.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from base.ports import free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TWO_RANK_GROUPS: dict[str, Callable[[Path], list[dict]]] = {}


def two_rank_group(name: str):
    """Register `fn(data_dir) -> [job]` under `name`; a job: {"name", "config", "overrides"} plus
    optional "env", "copy": [src, dst] and "remove": [paths] (run names of the same group), done in
    order after the jobs registered before it."""

    def register(fn):
        TWO_RANK_GROUPS[name] = fn
        return fn

    return register


def train_groups(data: Path, root: Path) -> dict[str, dict]:
    """Every registered group's jobs in one launch under `root`: {group: {job name: result}}, each
    result a CompletedProcess with `.run`, its run directory."""
    jobs, names = [], []
    for group, fn in TWO_RANK_GROUPS.items():
        for job in fn(data):
            jobs.append(
                {
                    "argv": [job["config"], *job["overrides"], "--run-dir", f"{group}/{job['name']}", "--no-progress"],
                    "env": job.get("env"),
                    "copy": [f"{group}/{p}" for p in job.get("copy", [])],
                    "remove": [f"{group}/{p}" for p in job.get("remove", [])],
                }
            )
            names.append((group, job["name"]))
    out: dict[str, dict] = {}
    for (group, name), res in zip(names, launch(jobs, root, timeout=1800)):
        res.run = root / group / name
        out.setdefault(group, {})[name] = res
    return out


def launch(jobs: list[dict], cwd: Path, timeout: int = 900) -> list[subprocess.CompletedProcess]:
    """Run `jobs` on two ranks; per job, a CompletedProcess whose returncode is the worst rank's and
    whose stdout/stderr are rank 0's followed by rank 1's (what the deepspeed launcher would print)."""
    cwd = Path(cwd)
    cwd.mkdir(parents=True, exist_ok=True)
    jobs = [{**j, "env": {"MASTER_PORT": str(free_port()), **(j.get("env") or {})}} for j in jobs]
    spec = cwd / f".two_ranks_{os.getpid()}_{len(list(cwd.glob('.two_ranks_*.json')))}.json"  # one per launch
    spec.write_text(json.dumps({"cwd": str(cwd), "jobs": jobs}))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    launcher = Path(sys.executable).parent / "deepspeed"
    p = subprocess.run(
        [str(launcher), "--num_gpus", "2", "--master_port", str(free_port()), str(HERE / "ranks.py"), str(spec)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    outs = []
    for rank in (0, 1):
        f = spec.with_suffix(f".rank{rank}.json")
        if not f.exists():
            raise AssertionError(
                f"rank {rank} wrote no results (launcher exit {p.returncode}):\n" + p.stdout[-3000:] + p.stderr[-3000:]
            )
        outs.append(json.loads(f.read_text()))
    if any(len(o) != len(jobs) for o in outs):
        raise AssertionError(
            f"a rank stopped before the last job (launcher exit {p.returncode}):\n"
            + p.stdout[-3000:]
            + p.stderr[-3000:]
        )
    results = []
    for job, r0, r1 in zip(jobs, *outs):
        code = max((r0["rc"], r1["rc"]), key=lambda c: (c != 0, c))
        results.append(subprocess.CompletedProcess(job["argv"], code, r0["out"] + r1["out"], r0["err"] + r1["err"]))
    return results


def _run_jobs(spec_path: Path) -> None:
    from pretrain.cli import main
    from tests.helpers.inprocess import captured, isolated

    spec = json.loads(spec_path.read_text())
    cwd, rank = Path(spec["cwd"]), int(os.environ["RANK"])
    results = []
    for i, job in enumerate(spec["jobs"]):
        ready = spec_path.with_suffix(f".job{i}.ready")
        if rank == 0:
            if job.get("copy"):
                src, dst = (cwd / p for p in job["copy"])
                shutil.copytree(src, dst, dirs_exist_ok=True)
            for path in job.get("remove", []):
                target = cwd / path
                shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
            ready.touch()
        else:
            while not ready.exists():
                time.sleep(0.01)
        with isolated(cwd, job.get("env")), captured() as out:
            rc = main([str(a) for a in job["argv"]])
        results.append({"rc": rc, "out": out["out"], "err": out["err"]})
        spec_path.with_suffix(f".rank{rank}.json").write_text(
            json.dumps(results)
        )  # after each: a hang shows how far it got


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    _run_jobs(Path([a for a in sys.argv[1:] if not a.startswith("--local_rank")][0]))
