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
MASTER_PORT: a store re-created on the port of the previous job's can hang. Rank 0 picks it when the
job starts and passes it in the ready file: a port picked when the launch began could be taken by
then (another worker's ranks bind ports all the time), and a store that cannot bind leaves the other
rank waiting for it for gloo's whole timeout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import PIPE

from base.ports import free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TWO_RANK_GROUPS: dict[str, Callable[[Path], list[dict]]] = {}
# pytest-timeout's limit for a test that reads `two_rank_runs` (tests/conftest.py): its set-up trains
# every registered run (75 s on an idle 2-core machine, 2026-11-27); the launch gives up a minute
# before it, so a hang is reported with how far each rank got, not as a bare timeout
TWO_RANK_TIMEOUT = 900


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
    for (group, name), res in zip(names, launch(jobs, root, timeout=TWO_RANK_TIMEOUT - 60)):
        res.run = root / group / name
        out.setdefault(group, {})[name] = res
    return out


def launch(jobs: list[dict], cwd: Path, timeout: int = 900) -> list[subprocess.CompletedProcess]:
    """Run `jobs` on two ranks; per job, a CompletedProcess whose returncode is the worst rank's and
    whose stdout/stderr are rank 0's followed by rank 1's (what the deepspeed launcher would print)."""
    cwd = Path(cwd)
    cwd.mkdir(parents=True, exist_ok=True)
    spec = cwd / f".two_ranks_{os.getpid()}_{len(list(cwd.glob('.two_ranks_*.json')))}.json"  # one per launch
    spec.write_text(json.dumps({"cwd": str(cwd), "jobs": jobs}))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    launcher = Path(sys.executable).parent / "deepspeed"
    argv = [str(launcher), "--num_gpus", "2", "--master_port", str(free_port()), str(HERE / "ranks.py"), str(spec)]
    # a session of its own: on a timeout (ours or pytest's) the ranks go with the launcher, not on as orphans
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=PIPE, stderr=PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException as e:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        if isinstance(e, subprocess.TimeoutExpired):
            raise AssertionError(_timed_out(timeout, spec, jobs, out, err)) from None
        raise
    p = subprocess.CompletedProcess(argv, proc.returncode, out, err)
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


def _timed_out(timeout: float, spec: Path, jobs: list[dict], out: str, err: str) -> str:
    """What a launch that ran past its timeout had done: the jobs each rank finished, the one it was
    in, and the launcher's last output."""
    lines = [f"two-rank launch ran past {timeout:.0f} s ({len(jobs)} jobs)"]
    for rank in (0, 1):
        f = spec.with_suffix(f".rank{rank}.json")
        done = json.loads(f.read_text()) if f.exists() else []
        stuck = jobs[len(done)]["argv"] if len(done) < len(jobs) else None
        lines.append(f"rank {rank}: {len(done)} finished (rc {[r['rc'] for r in done]}); in {stuck}")
        if done and done[-1]["rc"]:
            lines.append(f"rank {rank}'s last finished job's stderr:\n{done[-1]['err'][-2000:]}")
    return "\n".join([*lines, "launcher stdout:", out[-3000:], "launcher stderr:", err[-3000:]])


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
            port = (job.get("env") or {}).get("MASTER_PORT") or str(free_port())
            tmp = ready.with_suffix(".tmp")
            tmp.write_text(port)
            tmp.replace(ready)  # rank 1 never reads a half-written port
        else:
            while not ready.exists():
                time.sleep(0.01)
            port = ready.read_text()
        with isolated(cwd, {**(job.get("env") or {}), "MASTER_PORT": port}), captured() as out:
            rc = main([str(a) for a in job["argv"]])
        results.append({"rc": rc, "out": out["out"], "err": out["err"]})
        spec_path.with_suffix(f".rank{rank}.json").write_text(
            json.dumps(results)
        )  # after each: a hang shows how far it got


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    _run_jobs(Path([a for a in sys.argv[1:] if not a.startswith("--local_rank")][0]))
