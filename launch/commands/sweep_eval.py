"""`scalelab sweep eval SPEC --suite S`: evaluate every finished run of a sweep with an eval suite.

Idempotent: a run whose final step already has results for every task of the request (same
suite, none failed) is skipped, so rerunning after a failure or after more runs finished only
evaluates what is missing (`--force` evaluates again). Runs that are not done are listed and
left alone. Results land where `scalelab eval` puts them (`RUN/evals/<step>.json`, W&B
`eval/<task>/<metric>`), written by `evals.run_eval.evaluate_run`.

Executors, as for training:
- local: `--workers N` processes, each `python -m launch.commands.sweep_eval RUN [RUN ...]` over its share
  of the runs (lm-eval, torch and the task data are loaded once per process), cores split evenly;
- slurm: one job array, one task per run (`--manifest M --index $SLURM_ARRAY_TASK_ID`), with the
  spec's partition/account/qos/time/mem/cpus/extra/setup and one GPU when the runs have GPUs;
  `--dry-run` prints the script.
Each evaluation holds `RUN/evals/.lock` (flock), so two evaluations never write one run at once.
Exit codes: 0 ok, 1 an evaluation failed (or Slurm refused), 2 bad input (unknown suite or task,
missing eval data), before any model is loaded.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from base.cli import ArgumentParser
from evals.tasks import EvalError, resolve_tasks
from pretrain.errors import ConfigError
from rundir.layout import LOCK, RunDir
from rundir.summary import read_summary


@dataclass
class Request:
    suite: str
    tasks: str | None = None
    limit: float | None = None
    device: str | None = None
    threads: int | None = None
    wandb: bool = True
    bootstrap_iters: int = 100
    force: bool = False

    def argv(self) -> list[str]:
        out = ["--suite", self.suite]
        for flag, value in (
            ("--tasks", self.tasks),
            ("--limit", self.limit),
            ("--device", self.device),
            ("--threads", self.threads),
            ("--bootstrap-iters", self.bootstrap_iters),
        ):
            if value is not None:
                out += [flag, str(value)]
        return out + ([] if self.wandb else ["--no-wandb"]) + (["--force"] if self.force else [])

    def limit_value(self):
        if self.limit is None:
            return None
        return int(self.limit) if float(self.limit).is_integer() and self.limit >= 1 else self.limit


def resolve(req: Request) -> tuple[str, list[str]]:
    """(suite name as results record it, task names): unknown suites/tasks or missing data fail here (exit 2)."""

    from evals.run_eval import resolve_suite  # deferred: imports numpy/pydantic (a fast scalelab --help)

    try:
        s = resolve_suite(req.suite, req.tasks, req.limit_value(), None)
        tasks = [e.task for e in s.entries(limit_override=req.limit_value())]
        resolve_tasks(tasks).cleanup()  # local task files and data present
    except EvalError as exc:
        raise ConfigError(str(exc)) from None
    return s.name, tasks


def final_step(run_dir: Path) -> int | None:
    try:
        return int((read_summary(run_dir) or {})["steps"])
    except (ValueError, KeyError, TypeError):
        return None


def evaluated(run_dir: Path, suite: str, tasks: list[str]) -> bool:
    """Whether the run's final step has results of `suite` for every task, none of them failed."""
    step = final_step(run_dir)
    try:
        doc = json.loads(RunDir(run_dir).eval_file(step).read_text())
    except (OSError, ValueError):
        return False
    have = {r.get("task") for r in doc.get("results") or []}
    failed = {f.get("task") for f in doc.get("failed") or []}
    return suite in (doc.get("suites") or []) and all(t in have and t not in failed for t in tasks)


def select(plan, suite: str, tasks: list[str], force: bool) -> tuple[list, list[str], dict[str, str]]:
    """(runs to evaluate, runs already evaluated, {run: state} of runs not finished)."""

    from launch.sweep.status import run_status  # deferred: imports numpy/pydantic (a fast scalelab --help)

    todo, done, unfinished = [], [], {}
    for r in plan.runs:
        state = run_status(r.run_dir, r.name, r.id).state
        if state != "done":
            unfinished[r.name] = state
        elif not force and evaluated(Path(r.run_dir), suite, tasks):
            done.append(r.name)
        else:
            todo.append(r)
    return todo, done, unfinished


# ------------------------------------------------------------------ local
def run_local(run_dirs: list[Path], req: Request, workers: int, python: str | None = None) -> int:
    workers = max(1, min(workers, len(run_dirs)))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = req.threads or max(1, cores // workers)
    shares = [run_dirs[i::workers] for i in range(workers)]
    procs = []
    for share in shares:
        argv = [
            python or sys.executable,
            "-m",
            "launch.commands.sweep_eval",
            *map(str, share),
            *Request(**{**req.__dict__, "threads": threads}).argv(),
        ]
        procs.append(
            subprocess.Popen(argv, env={**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"})
        )
    codes = [p.wait() for p in procs]
    return max(codes, key=lambda c: (c != 0, c))


# ------------------------------------------------------------------ slurm
def render_script(spec, run_dirs: list[Path], manifest: Path, req: Request, python: str | None = None) -> str:

    from launch.executors.slurm import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        _common_directives,
        _env_lines,
        job_python,
        sweep_meta_dir,
    )

    s = spec.executor.slurm
    meta = sweep_meta_dir(spec.runs_root().resolve())
    suite = Path(req.suite).stem
    d = [
        f"--job-name={spec.name}-eval-{suite}",
        f"--array=0-{len(run_dirs) - 1}" + (f"%{s.max_parallel}" if s.max_parallel else ""),
        f"--output={meta}/slurm-eval-{suite}-%A_%a.out",
        "--open-mode=append",
        f"--chdir={Path.cwd()}",
        "--nodes=1",
        "--ntasks=1",
    ] + _common_directives(s)
    if s.gpus_per_node:
        d.append("--gpus-per-node=1")  # evaluation runs on one device
    if s.cpus_per_task:
        d.append(f"--cpus-per-task={s.cpus_per_task}")
    for extra in s.extra:
        d.append(extra if extra.startswith("-") else f"--{extra}")
    argv = [
        python or job_python(s),
        "-m",
        "launch.commands.sweep_eval",
        "--manifest",
        str(manifest),
        "--index",
        "$SLURM_ARRAY_TASK_ID",
        *req.argv(),
    ]
    lines = [
        "#!/bin/bash",
        f"# scalelab sweep eval {spec.name}: suite {req.suite} on {len(run_dirs)} finished run(s), one array task each",
    ]
    lines += [f"#SBATCH {x}" for x in d] + _env_lines(s) + s.setup
    lines += ["exec " + " ".join(a if a.startswith("$") else shlex.quote(a) for a in argv), ""]
    return "\n".join(lines)


def queued_evals(meta: Path, suite: str) -> set[str]:
    """Run dirs whose evaluation with `suite` is still in the Slurm queue (from eval-jobs.jsonl and squeue)."""

    path = meta / "eval-jobs.jsonl"
    if not path.exists() or not shutil.which("squeue"):
        return set()
    recs = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    recs = [r for r in recs if r.get("suite") == suite]
    if not recs:
        return set()
    out = subprocess.run(
        ["squeue", "-h", "-r", "-j", ",".join(r["job_id"] for r in recs), "-o", "%i"], capture_output=True, text=True
    )
    by_job = {r["job_id"]: r["run_dirs"] for r in recs}
    found = set()
    for jid in out.stdout.split() if out.returncode == 0 else []:
        job, _, task = jid.partition("_")
        if job in by_job and task.isdigit() and int(task) < len(by_job[job]):
            found.add(by_job[job][int(task)])
    return found


def submit_slurm(spec, run_dirs: list[Path], req: Request, suite_name: str, dry_run: bool, out=None) -> int:
    from launch.executors.slurm import sweep_meta_dir  # deferred: imports numpy/pydantic (a fast scalelab --help)

    out = out or sys.stdout  # read now: the default would pin the stdout of import time

    meta = sweep_meta_dir(spec.runs_root().resolve())
    queued = queued_evals(meta, suite_name)
    for d in [d for d in run_dirs if str(d) in queued]:
        out.write(f"skipped {d.name}: its evaluation is already queued\n")
    run_dirs = [d for d in run_dirs if str(d) not in queued]
    if not run_dirs:
        out.write("nothing to submit\n")
        return 0
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    manifest = meta / f"eval-{stamp}.txt"
    script = render_script(spec, run_dirs, manifest, req)
    if dry_run:
        out.write(
            f"# manifest {manifest} (index -> run dir)\n" + "".join(f"#   {i}: {d}\n" for i, d in enumerate(run_dirs))
        )
        out.write(script)
        return 0
    sbatch = shutil.which("sbatch")
    if not sbatch:
        print("error: `sbatch` not found: the slurm executor needs the Slurm client tools on PATH", file=sys.stderr)
        return 1
    meta.mkdir(parents=True, exist_ok=True)
    manifest.write_text("".join(f"{d}\n" for d in run_dirs))
    path = meta / f"{spec.name}-eval-{stamp}.sbatch"
    path.write_text(script)
    res = subprocess.run([sbatch, "--parsable", str(path)], capture_output=True, text=True)
    if res.returncode != 0:
        print(f"error: sbatch failed ({res.returncode}): {res.stderr.strip() or res.stdout.strip()}", file=sys.stderr)
        return 1
    job_id = res.stdout.strip().split(";")[0]
    with open(meta / "eval-jobs.jsonl", "a") as f:
        f.write(
            json.dumps(
                {
                    "job_id": job_id,
                    "suite": suite_name,
                    "submitted": stamp,
                    "script": str(path),
                    "run_dirs": [str(d) for d in run_dirs],
                }
            )
            + "\n"
        )
    out.write(f"submitted eval job array {job_id} ({len(run_dirs)} tasks, suite {suite_name}): {path}\n")
    return 0


# ------------------------------------------------------------------ CLI
def register(ss) -> None:
    q = ss.add_parser(
        "eval",
        help="evaluate every finished run with an eval suite (skips runs already evaluated)",
        description=__doc__.split("\n\n")[0],
    )
    q.add_argument("spec", help="sweep spec YAML (configs/sweeps/...)")
    q.add_argument(
        "--set", dest="spec_overrides", action="append", default=[], metavar="KEY=VALUE", help="edit the spec"
    )
    q.add_argument("--only", help="comma-separated run names (default: all)")
    q.add_argument(
        "--suite", default="tiny", help="suite in configs/evals/ (tiny, standard) or a YAML path (default tiny)"
    )
    q.add_argument("--tasks", help="comma-separated subset of the suite's tasks")
    q.add_argument("--limit", type=float, help="documents per task (overrides the suite; <1: fraction)")
    q.add_argument("--executor", choices=["local", "slurm"], default="local")
    q.add_argument(
        "--workers", type=int, help="local: evaluation processes at once (default: spec executor.local.workers)"
    )
    q.add_argument("--threads", type=int, help="torch threads per process (default cores / workers)")
    q.add_argument("--device", help="cpu, cuda (default: cuda if available)")
    q.add_argument("--no-wandb", action="store_true", help="do not log to the runs' W&B runs")
    q.add_argument("--bootstrap-iters", type=int, default=100, help="bootstrap samples for non-mean stderrs")
    q.add_argument("--force", action="store_true", help="evaluate again runs that already have results")
    q.add_argument("--dry-run", action="store_true", help="list what would be evaluated (slurm: print the script)")
    q.set_defaults(func=cmd_sweep_eval)


def cmd_sweep_eval(args) -> int:

    from launch.sweep.expand import load_plan  # deferred: imports numpy/pydantic (a fast scalelab --help)

    try:
        p = load_plan(args)
        req = Request(
            args.suite,
            args.tasks,
            args.limit,
            args.device,
            args.threads,
            not args.no_wandb,
            args.bootstrap_iters,
            args.force,
        )
        suite, tasks = resolve(req)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    todo, done, unfinished = select(p, suite, tasks, args.force)
    for name, state in unfinished.items():
        print(f"skipped {name}: {state}, not finished")
    print(
        f"{p.spec.name}: {len(todo)} to evaluate with {suite}, {len(done)} already evaluated, "
        f"{len(unfinished)} not finished"
    )
    if not todo:
        return 0
    run_dirs = [Path(r.run_dir).resolve() for r in todo]
    if args.executor == "slurm":
        return submit_slurm(p.spec, run_dirs, req, suite, args.dry_run)
    if args.dry_run:
        for d in run_dirs:
            print(f"{d.name}: python -m launch.commands.sweep_eval {d} {' '.join(req.argv())}")
        return 0
    t0 = time.time()
    code = run_local(run_dirs, req, args.workers or p.spec.executor.local.workers)
    ok = [d for d in run_dirs if evaluated(d, suite, tasks)]
    print(
        f"{p.spec.name}: {len(ok)} evaluated, {len(run_dirs) - len(ok)} failed, {len(done)} skipped "
        f"(already evaluated) in {time.time() - t0:.0f}s"
    )
    return 1 if code or len(ok) < len(run_dirs) else 0


# ------------------------------------------------------------------ worker process
def _lock(run_dir: Path):
    folder = RunDir(run_dir).evals
    folder.mkdir(exist_ok=True)
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def worker(argv: list[str] | None = None) -> int:
    """Evaluate the given runs in this process; a failing run is reported and the others go on."""
    from evals.run_eval import evaluate_run  # deferred: imports numpy/pydantic (a fast scalelab --help)

    ap = ArgumentParser(prog="python -m launch.commands.sweep_eval")
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--manifest")
    ap.add_argument("--index", type=int)
    ap.add_argument("--suite", required=True)
    ap.add_argument("--tasks")
    ap.add_argument("--limit", type=float)
    ap.add_argument("--device")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--bootstrap-iters", type=int, default=100)
    ap.add_argument("--no-wandb", action="store_true")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    runs = list(a.runs)
    if a.manifest:
        lines = [ln.strip() for ln in Path(a.manifest).read_text().splitlines() if ln.strip()]
        runs.append(lines[a.index if a.index is not None else int(os.environ.get("SLURM_ARRAY_TASK_ID", "0"))])
    req = Request(a.suite, a.tasks, a.limit, a.device, a.threads, not a.no_wandb, a.bootstrap_iters, a.force)
    try:
        suite, tasks = resolve(req)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if a.threads:
        import torch  # deferred: imports torch

        torch.set_num_threads(a.threads)

    failed, cache = 0, {}
    for run in map(Path, runs):
        fd = _lock(run)
        if fd is None:
            print(f"{run.name}: being evaluated by another process; skipped", flush=True)
            continue
        try:
            if not a.force and evaluated(run, suite, tasks):
                print(f"{run.name}: already evaluated with {suite}; skipped", flush=True)
                continue
            print(f"{run.name}: evaluating with {suite}", flush=True)
            out = evaluate_run(
                run,
                suite=req.suite,
                tasks=req.tasks,
                limit=req.limit_value(),
                device=req.device,
                wandb=req.wandb,
                bootstrap_iters=req.bootstrap_iters,
                task_cache=cache,
                log=lambda m, n=run.name: print(f"{n}: {m}", flush=True),
            )
            failed += bool(out["failed"])
        except Exception as exc:  # one bad run must not stop the others
            failed += 1
            print(f"{run.name}: evaluation FAILED: {type(exc).__name__}: {exc}", flush=True)
        finally:
            os.close(fd)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(worker())
