"""Where the tasks of `scalelab data prepare --tasks K` run: a local process pool, a Slurm array, Ray.

Each executor starts `python -m pretrain.data.tasks WORK PASS ID` (or, on Ray, its function) for the
tasks it is given and waits for them, printing one progress line now and then (tasks done/total,
MB of input read, MB/s, ETA) and writing it to `WORK/progress.json` for `scalelab sweep status`.
A task that fails leaves no manifest; the driver reports it and a rerun runs only the missing tasks.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from launch.executors import DATA_EXECUTORS
from pretrain.data.encode import PROJECT_ROOT, available_cores
from pretrain.data.tasks import progress, write_json
from pretrain.errors import ConfigError, DataError, TasksFailed

PROGRESS_FILE = "progress.json"
Say = Callable[[str], None]


def _env() -> dict:
    path = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


def task_argv(work: Path, phase: str, task: int | str, workers: int | None = None, python: str | None = None) -> list:
    argv = [python or sys.executable, "-m", "pretrain.data.tasks", str(work), phase, str(task)]
    return argv + ([str(workers)] if workers else [])


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")


class Watch:
    """The progress line of a pass: from the tasks' progress files, every `every` seconds."""

    def __init__(self, work: Path, phase: str, ids: list[int], say: Say, every: float):
        self.work, self.phase, self.ids, self.say, self.every = work, phase, ids, say, every
        self.t0 = time.time()
        self.last = 0.0

    def line(self) -> str:
        p = progress(self.work, self.phase, self.ids)
        el = max(1e-9, time.time() - self.t0)
        rate = p["bytes"] / el
        left = p["bytes_total"] - p["bytes"]
        eta = left / rate if rate > 0 else None
        name = "pass 1 (sample)" if self.phase == "sample" else "pass 2 (encode)"
        write_json(
            self.work / PROGRESS_FILE,
            {
                "pass": self.phase,
                "done": p["done"],
                "total": p["total"],
                "mb": p["bytes"] / 1e6,
                "mb_total": p["bytes_total"] / 1e6,
                "mb_s": rate / 1e6,
                "eta_s": eta,
                "at": time.time(),
                "finished": p["done"] == p["total"],
            },
        )
        return (
            f"  {name}: {p['done']}/{p['total']} tasks done, {p['bytes'] / 1e6:,.1f}/{p['bytes_total'] / 1e6:,.1f} MB, "
            f"{rate / 1e6:.2f} MB/s, ETA {fmt_seconds(eta if p['done'] < p['total'] else 0)}"
        )

    def tick(self, force: bool = False) -> None:
        if force or time.time() - self.last >= self.every:
            self.last = time.time()
            self.say(self.line())


def _failed(work: Path, phase: str, codes: dict[int, int], logs: dict[int, Path]) -> None:
    bad = {i: c for i, c in codes.items() if c != 0}
    if not bad:
        return
    parts = []
    for i, c in sorted(bad.items())[:3]:
        tail = logs[i].read_text(errors="replace").strip().splitlines()[-2:] if logs[i].is_file() else []
        parts.append(f"task {i} exit {c} ({logs[i]}): " + " | ".join(tail))
    raise TasksFailed(f"{len(bad)} task(s) failed: " + "; ".join(parts) + "; rerun to run only the failed tasks")


class LocalTasks:
    """Up to `parallel` task processes at once (default: the cores), each with cores/parallel tokenizer workers."""

    def __init__(self, parallel: int | None = None, workers: int | None = None, say: Say = print, every: float = 10.0):
        self.parallel, self.workers, self.say, self.every = parallel, workers, say, every

    def __call__(self, phase: str, ids: list[int], work: Path) -> None:
        cores = available_cores()
        parallel = max(1, min(len(ids), self.parallel or cores))
        workers = self.workers or max(1, cores // parallel)
        self.say(f"  local: {parallel} task process(es) at a time, {workers} tokenizer worker(s) each")
        (work / "logs").mkdir(exist_ok=True)
        todo, running, codes, logs = list(ids), {}, {}, {}
        watch = Watch(work, phase, ids, self.say, self.every)
        try:
            while todo or running:
                while todo and len(running) < parallel:
                    i = todo.pop(0)
                    logs[i] = work / "logs" / f"{phase}-{i:04d}.log"
                    with open(logs[i], "ab") as fh:
                        running[i] = subprocess.Popen(
                            task_argv(work, phase, i, workers), stdout=fh, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=_env(),
                        )  # fmt: skip
                for i, proc in list(running.items()):
                    if proc.poll() is not None:
                        codes[i] = proc.returncode
                        del running[i]
                watch.tick()
                time.sleep(0.1)
        finally:
            for proc in running.values():  # interrupted: no task outlives its driver
                proc.kill()
                proc.wait()
        watch.tick(force=True)
        _failed(work, phase, codes, logs)


class SlurmTasks:
    """One sbatch job array per pass (`--array=<ids>`), each array task one data task; waits for it."""

    def __init__(self, sbatch_args: list[str] | None = None, python: str | None = None, say: Say = print,
                 every: float = 10.0, poll: float = 2.0):  # fmt: skip
        self.args, self.python, self.say, self.every, self.poll = sbatch_args or [], python, say, every, poll

    def script(self, phase: str, ids: list[int], work: Path) -> str:
        logs = work / "logs"
        lines = [
            "#!/bin/bash",
            f"# scalelab data prepare: pass '{phase}', {len(ids)} task(s) of {work}",
            f"#SBATCH --job-name=data-{phase}",
            f"#SBATCH --array={','.join(map(str, ids))}",
            f"#SBATCH --output={logs}/{phase}-%a.log",
            "#SBATCH --open-mode=append",
            "#SBATCH --nodes=1",
            "#SBATCH --ntasks=1",
            f"#SBATCH --chdir={shlex.quote(str(Path.cwd()))}",
            *[f"#SBATCH {a}" for a in self.args],
            "set -eo pipefail",
            f"export PYTHONUNBUFFERED=1 PYTHONPATH={shlex.quote(_env()['PYTHONPATH'])}",
            "exec " + " ".join(shlex.quote(a) for a in task_argv(work, phase, "ID", python=self.python)),
            "",
        ]
        return "\n".join(lines).replace(" ID\n", " $SLURM_ARRAY_TASK_ID\n")

    def __call__(self, phase: str, ids: list[int], work: Path) -> None:
        sbatch, squeue = shutil.which("sbatch"), shutil.which("squeue")
        if not sbatch or not squeue:
            raise DataError("--executor slurm: sbatch/squeue not found on PATH")
        (work / "logs").mkdir(exist_ok=True)
        path = work / f"slurm-{phase}.sbatch"
        path.write_text(self.script(phase, ids, work))
        r = subprocess.run([sbatch, "--parsable", str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            raise DataError(f"sbatch failed ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
        job = r.stdout.strip().split(";")[0]
        self.say(f"  slurm: submitted job array {job} ({len(ids)} task(s); logs {work}/logs/{phase}-<id>.log)")
        watch = Watch(work, phase, ids, self.say, self.every)
        try:
            while True:
                q = subprocess.run([squeue, "-h", "-j", job, "-o", "%i"], capture_output=True, text=True)
                if q.returncode == 0 and not q.stdout.strip():
                    break
                watch.tick()
                time.sleep(self.poll)
        except KeyboardInterrupt:
            subprocess.run([shutil.which("scancel") or "scancel", job], capture_output=True)
            raise
        watch.tick(force=True)


class RayTasks:
    """Each task a Ray remote call (one CPU each) on the cluster `RAY_ADDRESS` names, else a local Ray."""

    def __init__(self, workers: int | None = None, say: Say = print, every: float = 10.0):
        self.workers, self.say, self.every = workers, say, every

    def __call__(self, phase: str, ids: list[int], work: Path) -> None:
        import ray  # deferred: an optional extra (pip install 'scalelab[ray]')

        if not ray.is_initialized():
            ray.init(
                address=os.environ.get("RAY_ADDRESS") or None,
                runtime_env={"env_vars": {"PYTHONPATH": _env()["PYTHONPATH"]}},
                include_dashboard=False,
                log_to_driver=False,
            )
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
        pending = {remote.remote(str(work), phase, i, self.workers or 1): i for i in ids}
        codes: dict[int, int] = {}
        logs = {i: work / "logs" / f"{phase}-{i:04d}.log" for i in ids}
        (work / "logs").mkdir(exist_ok=True)
        watch = Watch(work, phase, ids, self.say, self.every)
        self.say(f"  ray: {len(ids)} task(s) on {ray.cluster_resources().get('CPU', 0):.0f} CPUs")
        while pending:
            ready, _ = ray.wait(list(pending), timeout=0.5)
            for ref in ready:
                i = pending.pop(ref)
                try:
                    codes[i] = ray.get(ref)
                except Exception as exc:  # a task that raised or whose worker died
                    logs[i].write_text(f"{type(exc).__name__}: {exc}\n")
                    codes[i] = 1
            watch.tick()
        watch.tick(force=True)
        _failed(work, phase, codes, logs)


def _ray_task(work: str, phase: str, task: int, workers: int) -> int:
    log = Path(work) / "logs" / f"{phase}-{task:04d}.log"
    with open(log, "ab") as fh:
        return subprocess.run(task_argv(Path(work), phase, task, workers), stdout=fh, stderr=subprocess.STDOUT,
                              env=_env()).returncode  # fmt: skip


def make_runner(executor: str, say: Say = print, workers: int | None = None, sbatch_args: list[str] | None = None):
    if executor == "local":
        return LocalTasks(workers=workers, say=say)
    if executor == "slurm":
        return SlurmTasks(sbatch_args, say=say)
    if executor == "ray":
        try:
            import ray  # noqa: F401  deferred: an optional extra, checked before any work
        except ImportError:
            raise ConfigError(
                "--executor ray needs the `ray` package: pip install 'scalelab[ray]' (or use local|slurm)"
            ) from None
        return RayTasks(workers=workers, say=say)
    raise ConfigError(f"--executor: {executor!r} is not one of {', '.join(DATA_EXECUTORS)}")
