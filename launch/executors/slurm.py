"""Slurm executor: one sbatch job array per launch, one array task per run.

The script asks Slurm for `--signal=B:USR1@<secs>` (delivered to the batch shell, which `exec`s
the worker; the worker forwards it to the trainer, which checkpoints and exits 3, then requeues
its own task) and `--requeue` (preempted tasks go back to the queue and resume from their
checkpoint). Multi-GPU runs spawn one process per GPU; multi-node runs use `srun` per rank (no
ssh between nodes) or, with `launcher: deepspeed`, the DeepSpeed launcher with a hostfile built
from `scontrol show hostnames $SLURM_JOB_NODELIST`. Submitted jobs are recorded in
`<runs_dir>/.sweep/jobs.jsonl` so `status` and `cancel` find them again.

Data sets the runs need that are not prepared yet get one job each first (`scalelab data
prepare`, same partition/account/time/cpus, no GPUs); the array depends on them
(`--dependency=afterok:<ids>`, `--kill-on-invalid-dep=yes`: a failed prepare cancels the array
instead of leaving it pending forever).

Runs with a parent (`after`: WSD branches) whose checkpoint is not there yet cannot join the
array: Slurm has no dependency on a file, so each parent's waiting branches get their own array
with `--dependency=afterok:<parent's array task>`. They start when the parent's task has ended
well (the whole stable run, not its branch checkpoint); a failed parent cancels them.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from base.errors import UserError
from launch.run.worker import start_or_skip, write_launch_config
from launch.sweep import depends
from launch.sweep.data_jobs import data_jobs, prepare_argv, reads_the_hub, write_config
from launch.sweep.node_check import PREFIX_FAILED
from launch.sweep.slurm_fields import directive, no_control, option
from pretrain.errors import ConfigError
from rundir.lock import is_locked


class SlurmError(UserError, RuntimeError):
    pass


def sweep_meta_dir(root: Path) -> Path:
    return Path(root) / ".sweep"


def rank_mode(s) -> str:
    if s.launcher != "auto":
        return s.launcher
    if s.nodes > 1:
        return "srun"
    return "local" if s.gpus_per_node > 1 else "single"


def _common_directives(s) -> list[str]:
    """The user's strings, validated by the spec (slurm_fields) and quoted here."""
    d = []
    for key, val in (
        ("partition", s.partition),
        ("account", s.account),
        ("qos", s.qos),
        ("mem", s.mem),
        ("time", s.time),
    ):
        if val:
            d.append(option(key, val))
    return d


def job_python(s) -> str:
    """The interpreter a job runs: `executor.slurm.python`; else, with a `setup`, `python` as the job's
    own setup leaves it on the compute node's PATH (the venv it activates, the module it loads); else
    the launching interpreter (no setup: the nodes share this machine's filesystem and Python)."""
    if s.python:
        return s.python
    return "python" if s.setup else sys.executable


def _env_lines(s, online: bool = False) -> list[str]:
    """Offline Hugging Face by default (runs read prepared data and local files); a data job that
    streams a data set or a tokenizer from the Hub keeps the cluster's setting (network allowed)."""
    hf = "" if online else " HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} HF_DATASETS_OFFLINE=${HF_DATASETS_OFFLINE:-1}"
    return ["", "set -eo pipefail", "export PYTHONUNBUFFERED=1" + hf]


def render_data_script(spec, job, config_path: Path, python: str | None = None) -> str:
    """One `scalelab data prepare` job: one task on one node, the CPUs of a run's task, no GPUs."""

    s = spec.executor.slurm
    meta = sweep_meta_dir(spec.runs_root().resolve())
    d = [
        option("job-name", f"{spec.name}-data-{job.name}"),
        option("output", f"{meta}/slurm-data-{job.name}-%j.out"),
        option("chdir", Path.cwd()),
        "--nodes=1",
        "--ntasks=1",
    ] + _common_directives(s)
    if s.cpus_per_task:
        d.append(f"--cpus-per-task={s.cpus_per_task}")
    d += [directive(extra) for extra in s.extra]

    argv = prepare_argv(config_path, python or job_python(s))
    if job.config.tasks > 1:  # this job drives: each pass of its tasks is a job array with the runs' options
        cpus = [f"--cpus-per-task={s.cpus_per_task}"] if s.cpus_per_task else []
        argv += ["--executor", "slurm", *(f"--sbatch-arg={a}" for a in _common_directives(s) + cpus)]
    lines = [
        "#!/bin/bash",
        f"# scalelab sweep {spec.name}: prepare data '{job.name}' once for {len(job.runs)} run(s) ({job.reason})",
    ]
    hub = reads_the_hub(job.config)
    if hub:
        lines.append(
            f"# reads {hub} from the Hugging Face Hub: this job needs the network (HF_HUB_OFFLINE left as set)"
        )
    lines += [f"#SBATCH {x}" for x in d] + _env_lines(s, online=bool(hub)) + s.setup
    lines += ["exec " + " ".join(shlex.quote(a) for a in argv), ""]
    return "\n".join(lines)


def render_check_script(spec, python: str | None = None) -> str:
    """The node check (launch/sweep/node_check.py), first, where the array's tasks will run: one task,
    or with `nodes > 1` one per node of an allocation as large as a run's (`srun`), each printing its line."""
    s = spec.executor.slurm
    meta = sweep_meta_dir(spec.runs_root().resolve())
    d = [
        option("job-name", f"{spec.name}-check"),
        option("output", f"{meta}/slurm-check-%j.out"),
        option("chdir", Path.cwd()),
        f"--nodes={s.nodes}",
        f"--ntasks={s.nodes}" if s.nodes > 1 else "--ntasks=1",
    ] + _common_directives(s)
    if s.nodes > 1:
        d.append("--ntasks-per-node=1")
    if s.gpus_per_node:
        d.append(f"--gpus-per-node={s.gpus_per_node}")
    if s.cpus_per_task:
        d.append(f"--cpus-per-task={s.cpus_per_task}")
    d += [directive(extra) for extra in s.extra]
    argv = [python or job_python(s), "-m", "launch.sweep.node_check", "--gpus", str(s.gpus_per_node)]
    if s.nodes > 1:  # every node of the allocation; srun fails when any node's check does
        argv = ["srun", f"--nodes={s.nodes}", f"--ntasks={s.nodes}", "--ntasks-per-node=1", *argv]
    what = f"each of {s.nodes} compute nodes" if s.nodes > 1 else "a compute node"
    lines = [
        "#!/bin/bash",
        f"# scalelab sweep {spec.name}: check {what} (torch, DeepSpeed, GPUs) before the array",
    ]
    lines += [f"#SBATCH {x}" for x in d] + _env_lines(s) + s.setup
    lines += ["exec " + " ".join(shlex.quote(a) for a in argv), ""]
    return "\n".join(lines)


def render_script(
    spec,
    run_dirs: list[Path],
    manifest: Path,
    retry_failed: bool = False,
    python: str | None = None,
    depends_on: list[str] | None = None,
) -> str:
    s = spec.executor.slurm
    meta = sweep_meta_dir(spec.runs_root().resolve())
    n = len(run_dirs)
    mode = rank_mode(s)
    tasks_per_node = max(1, s.gpus_per_node) if mode == "srun" else 1
    d = [
        option("job-name", spec.name),
        f"--array=0-{n - 1}" + (f"%{s.max_parallel}" if s.max_parallel else ""),
        option("output", f"{meta}/slurm-%A_%a.out"),
        "--open-mode=append",
        option("chdir", Path.cwd()),
        f"--nodes={s.nodes}",
        f"--ntasks-per-node={tasks_per_node}",
        f"--signal=B:USR1@{s.signal_secs}",
    ]
    if s.requeue:
        d.append("--requeue")
    if depends_on:
        d += ["--dependency=afterok:" + ":".join(depends_on), "--kill-on-invalid-dep=yes"]
    d += _common_directives(s)
    if s.gpus_per_node:
        d.append(f"--gpus-per-node={s.gpus_per_node}")
    if s.cpus_per_task:
        d.append(f"--cpus-per-task={s.cpus_per_task}")
    d += [directive(extra) for extra in s.extra]
    py = python or job_python(s)
    threads = s.cpus_per_task if (s.cpus_per_task and not s.gpus_per_node) else None
    worker = [
        py,
        "-m",
        "launch.run.worker",
        "--manifest",
        str(manifest),
        "--index",
        "$SLURM_ARRAY_TASK_ID",
        "--mode",
        mode,
        "--nodes",
        str(s.nodes),
        "--gpus",
        str(s.gpus_per_node),
        "--port",
        str(s.master_port),
    ]
    if threads:
        worker += ["--threads", str(threads)]
    if s.requeue:
        worker += ["--requeue", "--max-requeues", str(s.max_requeues)]
    if retry_failed:
        worker.append("--retry-failed")
    lines = ["#!/bin/bash", f"# scalelab sweep {spec.name}: {n} runs, one array task each (rank mode: {mode})"]
    lines += [f"#SBATCH {x}" for x in d]
    lines += _env_lines(s)
    if threads:
        lines.append(f"export OMP_NUM_THREADS={threads}")
    lines += s.setup
    lines += [
        "# exec: the worker receives Slurm's USR1 itself and forwards it to the trainer",
        "exec " + " ".join(a if a.startswith("$") else shlex.quote(a) for a in worker),
        "",
    ]
    return "\n".join(lines)


def _need(cmd: str) -> str:
    path = shutil.which(cmd)
    if not path:
        raise SlurmError(f"`{cmd}` not found: the slurm executor needs the Slurm client tools on PATH")
    return path


def queued_jobs(root: Path) -> dict[str, str]:
    """run name -> 'jobid_task (STATE)' for this sweep's tasks still known to squeue."""
    meta = sweep_meta_dir(Path(root))
    records = _records(meta)
    if not records or not shutil.which("squeue"):
        return {}
    ids = ",".join(r["job_id"] for r in records)
    out = subprocess.run(["squeue", "-h", "-r", "-j", ids, "-o", "%i|%T"], capture_output=True, text=True)
    if out.returncode != 0:
        return {}
    by_job = {r["job_id"]: r for r in records}
    found: dict[str, str] = {}
    for line in out.stdout.splitlines():
        jid, _, state = line.strip().partition("|")
        job, _, task = jid.partition("_")
        rec = by_job.get(job)
        if rec is None or not task.isdigit():
            continue
        idx = int(task)
        if idx < len(rec["runs"]):
            found[rec["runs"][idx]] = f"{jid} ({state})"
    return found


def node_check_failure(root: Path) -> str | None:
    """The message of the sweep's last node check when it failed (launch/sweep/node_check.py), else None."""
    checks = [r for r in _records(sweep_meta_dir(Path(root))) if r.get("kind") == "check"]
    if not checks:
        return None
    try:
        text = Path(checks[-1]["output"]).read_text(errors="replace")
    except OSError:
        return None

    lines = [ln for ln in text.splitlines() if ln.startswith(PREFIX_FAILED)]
    if lines:
        return f"job {checks[-1]['job_id']}: {lines[-1]}"
    if text.strip() and "node check: ok" not in text:  # the interpreter itself did not start
        return f"job {checks[-1]['job_id']}: " + text.strip().splitlines()[-1][:300]
    return None


def _records(meta: Path) -> list[dict]:
    path = meta / "jobs.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


class SlurmExecutor:
    def __init__(self, spec):
        self.spec = spec

    def select(self, runs: list, retry_failed: bool) -> tuple[list, dict[str, str]]:
        """Runs that need a task now; skipped ones with the reason."""
        queued = queued_jobs(self.spec.runs_root())
        todo, skipped = [], {}

        for r in runs:
            what = start_or_skip(Path(r.run_dir), retry_failed, r.id)
            if what != "run":
                skipped[r.name] = what
            elif r.name in queued:
                skipped[r.name] = f"already queued as {queued[r.name]}"
            elif is_locked(r.run_dir):
                skipped[r.name] = "running"
            else:
                todo.append(r)
        return todo, skipped

    def _waves(self, todo: list, skipped: dict) -> tuple[list, dict[str, list]]:
        """(runs that may start now, parent name -> its runs that wait for its checkpoint); runs whose
        parent is neither submitted now nor queued are skipped with the reason."""

        now = [r for r in todo if depends.may_start(r)]
        names = {r.name for r in now}
        queued = queued_jobs(self.spec.runs_root())
        waiting: dict[str, list] = {}
        for r in todo:
            if depends.may_start(r):
                continue
            parent = r.after[0]
            if parent in names or parent in queued:
                waiting.setdefault(parent, []).append(r)
            else:
                skipped[r.name] = (
                    f"waits for {depends.parent_checkpoint(r)}, which will not be written "
                    f"({parent} is neither submitted nor queued)"
                )
        return now, waiting

    def launch(self, runs: list, retry_failed: bool = False, dry_run: bool = False, out=None) -> dict:
        out = out or sys.stdout  # read now: the default would pin the stdout of import time
        todo, skipped = self.select(runs, retry_failed)
        todo, waiting = self._waves(todo, skipped)
        root = self.spec.runs_root().resolve()
        meta = sweep_meta_dir(root)
        stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
        manifest = meta / f"array-{stamp}.txt"
        run_dirs = [Path(r.run_dir).resolve() for r in todo]
        if not todo and not waiting:
            return {"job_id": None, "runs": [], "skipped": skipped, "script": None, "data_jobs": [], "branch_jobs": []}

        jobs = data_jobs(todo + [r for rs in waiting.values() for r in rs])
        if dry_run:
            for job in jobs:
                out.write(f"# data job (submitted first): {job.config_path(meta)}\n")
                out.write(render_data_script(self.spec, job, job.config_path(meta)) + "\n")
            out.write("# node check (submitted before the arrays, which start after it ends well):\n")
            out.write(render_check_script(self.spec) + "\n")
            deps = ["<node check>"] + [f"<data job {job.name}>" for job in jobs]
            script = None
            if todo:
                script = render_script(self.spec, run_dirs, manifest, retry_failed, depends_on=deps)
                out.write(
                    f"# manifest {manifest} (index -> run dir)\n"
                    + "".join(f"#   {i}: {d}\n" for i, d in enumerate(run_dirs))
                )
                out.write(script)
            for parent, rs in waiting.items():
                out.write(f"\n# branches of {parent}, after its task ends well:\n")
                out.write(
                    render_script(
                        self.spec,
                        [Path(r.run_dir).resolve() for r in rs],
                        meta / f"array-{stamp}-{parent}.txt",
                        retry_failed,
                        depends_on=[f"<task of {parent}>"],
                    )
                )
            return {
                "job_id": None,
                "runs": [r.name for r in todo],
                "skipped": skipped,
                "script": script,
                "data_jobs": [job.name for job in jobs],
                "branch_jobs": [{"after": p, "runs": [r.name for r in rs]} for p, rs in waiting.items()],
            }
        sbatch = _need("sbatch")
        meta.mkdir(parents=True, exist_ok=True)
        check_id = self._submit_check(sbatch, meta, stamp) if todo else None  # branches follow a checked parent
        data_ids = []
        for job in jobs:
            config = write_config(job, meta)
            data_script = meta / f"{self.spec.name}-data-{job.name}-{stamp}.sbatch"
            data_script.write_text(render_data_script(self.spec, job, config))
            res = subprocess.run([sbatch, "--parsable", str(data_script)], capture_output=True, text=True)
            if res.returncode != 0:
                raise SlurmError(
                    f"sbatch of the data job for '{job.name}' failed ({res.returncode}): "
                    f"{res.stderr.strip() or res.stdout.strip()}"
                )
            data_ids.append(res.stdout.strip().split(";")[0])
            with open(meta / "jobs.jsonl", "a") as f:
                f.write(
                    json.dumps(
                        {
                            "job_id": data_ids[-1],
                            "kind": "data",
                            "data": job.name,
                            "submitted": stamp,
                            "script": str(data_script),
                            "config": str(config),
                            "runs": [],
                        }
                    )
                    + "\n"
                )
        rec = {"job_id": None, "runs": [], "script": None}
        tasks: dict[str, str] = {}  # run name -> its array task (jobid_index), for the branches' dependency
        if todo:
            rec = self._submit(
                sbatch,
                todo,
                manifest,
                meta / f"{self.spec.name}-{stamp}.sbatch",
                retry_failed,
                [check_id, *data_ids],
                stamp,
            )
            tasks = {r.name: f"{rec['job_id']}_{i}" for i, r in enumerate(todo)}
        queued = queued_jobs(self.spec.runs_root()) if waiting else {}
        branch_jobs = []
        for parent, rs in waiting.items():
            dep = tasks.get(parent) or queued[parent].split()[0]
            branch_jobs.append(
                self._submit(
                    sbatch,
                    rs,
                    meta / f"array-{stamp}-{parent}.txt",
                    meta / f"{self.spec.name}-{stamp}-{parent}.sbatch",
                    retry_failed,
                    [dep],
                    stamp,
                )
            )
            branch_jobs[-1]["after"] = parent
        return {
            **rec,
            "skipped": skipped,
            "data_jobs": [{"job_id": i, "data": j.name} for i, j in zip(data_ids, jobs)],
            "branch_jobs": branch_jobs,
            "check_job": check_id,
        }

    def _submit_check(self, sbatch: str, meta: Path, stamp: str) -> str:
        """Submit the node check (render_check_script); recorded in jobs.jsonl as kind `check`."""
        script = meta / f"{self.spec.name}-check-{stamp}.sbatch"
        script.write_text(render_check_script(self.spec))
        res = subprocess.run([sbatch, "--parsable", str(script)], capture_output=True, text=True)
        if res.returncode != 0:
            raise SlurmError(
                f"sbatch of the node check failed ({res.returncode}): {res.stderr.strip() or res.stdout.strip()}"
            )
        job_id = res.stdout.strip().split(";")[0]
        with open(meta / "jobs.jsonl", "a") as f:
            f.write(
                json.dumps(
                    {
                        "job_id": job_id,
                        "kind": "check",
                        "submitted": stamp,
                        "script": str(script),
                        "output": str(meta / f"slurm-check-{job_id}.out"),
                        "runs": [],
                    }
                )
                + "\n"
            )
        return job_id

    def _submit(
        self,
        sbatch: str,
        runs: list,
        manifest: Path,
        script_path: Path,
        retry_failed: bool,
        depends_on: list[str],
        stamp: str,
    ) -> dict:
        """One job array (one task per run), recorded in jobs.jsonl."""
        run_dirs = [Path(r.run_dir).resolve() for r in runs]
        script = render_script(self.spec, run_dirs, manifest, retry_failed, depends_on=depends_on)
        for r in runs:
            Path(r.run_dir).mkdir(parents=True, exist_ok=True)
            write_launch_config(r)
        manifest.write_text("".join(f"{d}\n" for d in run_dirs))
        script_path.write_text(script)
        res = subprocess.run([sbatch, "--parsable", str(script_path)], capture_output=True, text=True)
        if res.returncode != 0:
            raise SlurmError(f"sbatch failed ({res.returncode}): {res.stderr.strip() or res.stdout.strip()}")
        job_id = res.stdout.strip().split(";")[0]
        rec = {
            "job_id": job_id,
            "submitted": stamp,
            "script": str(script_path),
            "manifest": str(manifest),
            "runs": [r.name for r in runs],
        }
        if depends_on:
            rec["depends_on"] = depends_on
        with open(sweep_meta_dir(self.spec.runs_root().resolve()) / "jobs.jsonl", "a") as f:
            f.write(json.dumps(rec) + "\n")
        return rec

    def cancel(self, names: list[str] | None = None) -> list[str]:
        """scancel this sweep's queued/running tasks (all, or only those of `names`)."""
        scancel = _need("scancel")
        queued = queued_jobs(self.spec.runs_root())
        targets = [q.split()[0] for n, q in queued.items() if names is None or n in names]
        if targets:
            subprocess.run([scancel, *targets], check=False)
        return targets


def check_spec(spec) -> None:
    """What the spec's own validation cannot see: the paths that go into the script."""
    s = spec.executor.slurm
    for what, path in (("runs_dir", spec.runs_root().resolve()), ("the current directory", Path.cwd())):
        try:
            no_control(str(path), "the path")
        except ValueError as exc:
            raise ConfigError(f"{what}: {exc}") from None
    if s.nodes > 1 and rank_mode(s) in ("single", "local"):
        raise ConfigError("executor.slurm: nodes > 1 needs launcher srun or deepspeed")
