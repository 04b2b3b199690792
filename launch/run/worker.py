"""Train one run of a sweep under its lock: the unit every executor starts.

`python -m launch.run.worker RUN_DIR` (or `--manifest FILE --index I` inside a Slurm array task):
takes `<run_dir>/.lock` (a run held by another launch is an error: exit 1 naming the holder),
skips a run that is done (or failed, unless --retry-failed), starts the trainer on
`<run_dir>/launch.yaml` with output appended to `<run_dir>/train.log`, and forwards
SIGUSR1/SIGTERM/SIGINT to it (the trainer checkpoints and exits 3). Under Slurm, only SIGUSR1 (what
`--signal=B:USR1@secs` sends before the time limit) requeues the task after that checkpoint, at
most `--max-requeues` times per job, each one recorded in `<run_dir>/requeues.jsonl`; SIGTERM is
a cancel (or Slurm's own preemption, which requeues by itself): the task ends there. Ranks:
single process, locally spawned ranks (one node, several GPUs), `srun` per rank (several nodes,
no ssh) or the DeepSpeed launcher with a hostfile built from SLURM_JOB_NODELIST.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

from base.cli import ArgumentParser
from launch.run.ds_env import write_env_file
from launch.run.locks import RunLock, slurm_task
from launch.sweep.status import run_status
from rundir.files import atomic_write_text
from rundir.layout import LAUNCH_CONFIG, REQUEUES, TRAIN_LOG
from rundir.lock import read_holder
from rundir.summary import read_summary

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_STOPPED = 0, 1, 2, 3
DEFAULT_MAX_REQUEUES = 3
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


def died_of(code: int, signals) -> str | None:
    """The name of the signal in `signals` that killed a process with exit `code` (Popen's -N, or
    128+N from a shell or launcher), else None."""
    nums = {int(s) for s in signals}
    n = -code if code < 0 else code - 128
    return signal.Signals(n).name if n in nums else None


def stopped_in_startup(code: int, signals) -> bool:
    """A trainer killed by a stop signal (one its launcher forwarded) before Python could install a
    handler: nothing was trained in that attempt, so the run is stopped, not failed."""
    return code not in (EXIT_OK, EXIT_STOPPED) and died_of(code, signals) is not None


def write_launch_config(run) -> Path:
    """The fully expanded config a run trains on (rewritten only when it changed)."""

    path = Path(run.run_dir) / LAUNCH_CONFIG
    text = f"# written by scalelab sweep for run {run.name} (id {run.id}); do not edit\n" + yaml.safe_dump(
        run.raw, sort_keys=False
    )
    if not path.exists() or path.read_text() != text:
        atomic_write_text(path, text)
    return path


def start_or_skip(run_dir: Path, retry_failed: bool, planned_id: str | None = None) -> str:
    """'done', 'failed', 'stale' (skip) or 'run' (fresh, partial or preempted: the trainer resumes).

    stale: the directory holds a run of a different config than the spec now plans under this
    name (the trainer would refuse it); the user deletes the directory or renames the sweep."""
    if planned_id:
        if run_status(run_dir, planned_id=planned_id).state == "stale":
            return "stale"
    status = (read_summary(run_dir) or {}).get("status")
    if status == "done":
        return "done"
    if status == "failed" and not retry_failed:
        return "failed"
    return "run"


def train_argv(run_dir: Path, python: str | None = None, overrides: list[str] | None = None) -> list[str]:
    return [
        python or sys.executable,
        "-m",
        "pretrain.cli",
        str(run_dir / LAUNCH_CONFIG),
        *(overrides or []),
        "--run-dir",
        str(run_dir),
    ]


def open_log(run_dir: Path, header: str):
    f = open(run_dir / TRAIN_LOG, "ab", buffering=0)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    f.write(f"=== {stamp} {socket.gethostname()} {header}\n".encode())
    return f


def start_trainer(run_dir: Path, argv: list[str], env: dict, lock: RunLock, log, warm=None):
    """Start the trainer; it inherits the lock's descriptor so the lock outlives a dead parent.

    `warm` (a `launch.run.warm_start.WarmStarter`): fork it from there when it can, else (and by
    default) a new process."""
    env = {**env, "PYTHONUNBUFFERED": "1", "SCALELAB_RUN_LOCK_FD": str(lock.fd)}
    if warm is not None:
        proc = warm.start(argv, env, os.getcwd(), log.fileno(), lock.fd, run_dir)
        if proc is not None:
            return proc
    return subprocess.Popen(
        argv,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        pass_fds=(lock.fd,),
        start_new_session=True,
    )


def claim(
    run_dir: Path,
    role: str,
    retry_failed: bool,
    planned_id: str | None = None,
    wait_s: float = 1.0,
    slurm_job: str | None = None,
) -> tuple[RunLock | None, str]:
    """Lock, then decide under the lock (`start_or_skip`): the one way a worker or executor takes a run.

    (lock, "run") with the lock held; else (None, why): "busy" (held by another launch) or what `start_or_skip`
    said ("done", "failed", "stale"). Deciding under the lock matters: another launch may have just finished it."""
    lock = RunLock(run_dir, role=role, slurm_job=slurm_job)
    if not lock.acquire(wait_s=wait_s):
        return None, "busy"
    what = start_or_skip(run_dir, retry_failed, planned_id)
    if what != "run":
        lock.release()
        return None, what
    return lock, "run"


def start_trainers(
    run_dir: Path,
    lock: RunLock,
    commands: list[tuple[list[str], dict]],
    header: str,
    procs: list | None = None,
    warm=None,
):
    """Open the run's log and start one trainer process per (argv, env) under the held lock, recorded in it.
    `procs` (filled as they start) lets a signal handler reach the ranks already started; `warm`: see
    `start_trainer`. Returns (procs, log)."""
    log = open_log(run_dir, header)
    procs = [] if procs is None else procs
    for argv, env in commands:
        procs.append(start_trainer(run_dir, argv, env, lock, log, warm))
    lock.add_trainers([p.pid for p in procs])
    return procs, log


# ------------------------------------------------------------------ ranks inside a job
def slurm_hosts() -> list[str]:
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if not nodelist:
        return [socket.gethostname()]
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    return out.stdout.split()


def rank_commands(
    mode: str, base_argv: list[str], nodes: int, gpus: int, port: int, run_dir: Path
) -> list[tuple[list[str], dict]]:
    """(argv, extra env) per process the worker starts itself."""
    python, rest = base_argv[0], base_argv[3:]  # drop "-m pretrain.cli"
    if mode == "single":
        return [(base_argv, {})]
    if mode == "local":
        n = max(1, gpus)
        return [
            (
                base_argv,
                {
                    "RANK": str(i),
                    "LOCAL_RANK": str(i),
                    "WORLD_SIZE": str(n),
                    "LOCAL_WORLD_SIZE": str(n),
                    "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port),
                },
            )
            for i in range(n)
        ]
    hosts = slurm_hosts()
    if mode == "srun":
        per = max(1, gpus)
        argv = [
            "srun",
            f"--nodes={nodes}",
            f"--ntasks={nodes * per}",
            f"--ntasks-per-node={per}",
            "--kill-on-bad-exit=1",
            python,
            "-m",
            "launch.run.worker",
            "--rank-shim",
            "--",
            *base_argv[1:],
        ]
        return [(argv, {"MASTER_ADDR": hosts[0], "MASTER_PORT": str(port)})]
    if mode == "deepspeed":
        hostfile = run_dir / "hostfile"
        hostfile.write_text("".join(f"{h} slots={max(1, gpus)}\n" for h in hosts[:nodes]))
        argv = [
            "deepspeed",
            "--hostfile",
            str(hostfile),
            "--num_nodes",
            str(nodes),
            "--num_gpus",
            str(max(1, gpus)),
            "--master_addr",
            hosts[0],
            "--master_port",
            str(port),
            "--module",
            "pretrain.cli",
            *rest,
        ]
        return [(argv, {"DS_ENV_FILE": str(write_env_file(run_dir).resolve())})]  # what remote ranks need
    raise ValueError(f"unknown rank mode {mode}")


def rank_shim(argv: list[str]) -> None:
    """Under `srun`: map SLURM_PROCID/NTASKS/LOCALID to the torch/DeepSpeed env, then exec."""
    env = os.environ
    env["RANK"] = env.get("SLURM_PROCID", "0")
    env["WORLD_SIZE"] = env.get("SLURM_NTASKS", "1")
    env["LOCAL_RANK"] = env.get("SLURM_LOCALID", "0")
    env["LOCAL_WORLD_SIZE"] = env.get("SLURM_NTASKS_PER_NODE", "1").split("(")[0]
    os.execv(sys.executable, [sys.executable, *argv])


def busy_message(run_dir: Path) -> str:
    holder = read_holder(run_dir)
    who = holder.describe() if holder else "an unknown process"
    since = (
        f" since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(holder.since))}" if holder and holder.since else ""
    )
    return (
        f"{run_dir.name}: held by another launch ({who}{since}); not started. "
        f"Wait for it, or stop it (`scalelab sweep cancel`), then launch again"
    )


def requeues_so_far(run_dir: Path, job: str) -> int:
    """Requeues this worker's job already made for this run (one JSON line each in requeues.jsonl)."""
    n = 0
    try:
        lines = (run_dir / REQUEUES).read_text().splitlines()
    except FileNotFoundError:
        return 0
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        n += isinstance(rec, dict) and rec.get("job") == job and bool(rec.get("requeued"))
    return n


def record_requeue(run_dir: Path, rec: dict) -> None:
    with open(run_dir / REQUEUES, "a") as f:
        f.write(json.dumps(rec) + "\n")


def after_stop(run_dir: Path, got: list[int], job: str | None, requeue: bool, max_requeues: int) -> tuple[bool, str]:
    """After the trainer checkpointed and exited 3: (requeue the task?, what to say).

    Only the preemption signal (SIGUSR1, sent by `--signal=B:USR1@secs`) requeues, and only while
    under the cap; SIGTERM/SIGINT mean cancel (or Slurm's own preemption, which requeues by itself)."""
    names = [signal.Signals(g).name for g in got]
    if not (requeue and job):
        return False, f"stopped after a checkpoint ({', '.join(names) or 'signal'})"
    if signal.SIGUSR1 not in got or signal.SIGTERM in got or signal.SIGINT in got:
        return (
            False,
            f"stopped after a checkpoint ({', '.join(names) or 'signal'}): "
            "cancelled, not requeued; `scalelab sweep launch` resumes it",
        )
    done = requeues_so_far(run_dir, job)
    rec = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "job": job,
        "signal": "SIGUSR1",
        "host": socket.gethostname(),
        "step": _last_step(run_dir),
        "requeued": done < max_requeues,
        "count": done + 1 if done < max_requeues else done,
        "max_requeues": max_requeues,
    }
    record_requeue(run_dir, rec)
    if done >= max_requeues:
        return False, (
            f"checkpointed after SIGUSR1 but job {job} already requeued itself {done} time(s) "
            f"(executor.slurm.max_requeues={max_requeues}); not requeued: `scalelab sweep launch` resumes it"
        )
    return True, f"checkpointed after SIGUSR1; requeueing {job} ({done + 1} of at most {max_requeues})"


def _last_step(run_dir: Path) -> int | None:
    return (read_summary(run_dir) or {}).get("steps")


def run_one(
    run_dir: Path,
    *,
    retry_failed: bool = False,
    mode: str = "single",
    nodes: int = 1,
    gpus: int = 0,
    port: int = 29500,
    threads: int | None = None,
    requeue: bool = False,
    python: str | None = None,
    max_requeues: int = DEFAULT_MAX_REQUEUES,
    slurm_job: str | None = None,
) -> int:
    run_dir = Path(run_dir)
    if not (run_dir / LAUNCH_CONFIG).exists():
        print(f"{run_dir}: no {LAUNCH_CONFIG}; plan and launch the sweep first", file=sys.stderr)
        return EXIT_CONFIG
    # A few seconds' grace: a requeued task may start while its predecessor's last process exits.
    lock, what = claim(run_dir, "worker", retry_failed, wait_s=5.0, slurm_job=slurm_job)
    if what == "busy":
        # Not a success: a requeued task that "completes" here would leave the run partial for good.
        print(f"error: {busy_message(run_dir)}", file=sys.stderr)
        return EXIT_FAILED
    if what != "run":
        print(f"{run_dir.name}: {what}; skipped" + (" (use --retry-failed)" if what == "failed" else ""))
        return EXIT_OK if what == "done" else EXIT_FAILED
    try:
        overrides = [f"train.threads={threads}"] if threads else []
        base = train_argv(run_dir, python, overrides)
        env = dict(os.environ)
        if threads:
            env["OMP_NUM_THREADS"] = str(threads)
        job = slurm_task()
        restarts = os.environ.get("SLURM_RESTART_COUNT")
        header = (
            f"worker pid {os.getpid()} job {job or '-'}"
            + (f" restart {restarts}" if restarts else "")
            + f" mode {mode}: {' '.join(base)}"
        )
        got: list[int] = []
        procs: list[subprocess.Popen] = []

        def forward(signum, frame):
            got.append(signum)
            for p in procs:
                try:
                    os.killpg(p.pid, signum) if mode != "srun" else p.send_signal(signum)
                except ProcessLookupError:
                    pass

        for sig in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, forward)
        commands = [(argv, {**env, **extra}) for argv, extra in rank_commands(mode, base, nodes, gpus, port, run_dir)]
        _, log = start_trainers(run_dir, lock, commands, header, procs)
        if got:  # a signal that came while the ranks were starting
            forward(got[-1], None)
        codes = [p.wait() for p in procs]
        code = max(codes, key=lambda c: (c != 0, c))
        log.write(f"=== trainer exit code {code}\n".encode())
        if got and stopped_in_startup(code, got):
            log.write(
                f"=== the trainer died of {died_of(code, got)} "
                "while starting: nothing trained in this attempt\n".encode()
            )
            code = EXIT_STOPPED
        again = False
        if code == EXIT_STOPPED:
            again, msg = after_stop(run_dir, got, job, requeue, max_requeues)
            log.write(f"=== {msg}\n".encode())
            print(f"{run_dir.name}: {msg}")
        log.close()
        if again:
            lock.release()
            subprocess.run(["scontrol", "requeue", job], check=False)
        return code
    finally:
        lock.release()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--rank-shim"]:
        rank_shim(argv[2:] if argv[1:2] == ["--"] else argv[1:])
    p = ArgumentParser(prog="python -m launch.run.worker", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", nargs="?")
    p.add_argument("--manifest", help="file with one run directory per line (Slurm array)")
    p.add_argument("--index", type=int, help="line of the manifest (SLURM_ARRAY_TASK_ID)")
    p.add_argument("--retry-failed", action="store_true")
    p.add_argument("--mode", default="single", choices=["single", "local", "srun", "deepspeed"])
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--gpus", type=int, default=0)
    p.add_argument("--port", type=int, default=29500)
    p.add_argument("--threads", type=int)
    p.add_argument("--requeue", action="store_true", help="requeue the Slurm task after a SIGUSR1 checkpoint")
    p.add_argument("--max-requeues", type=int, default=DEFAULT_MAX_REQUEUES, help="at most this many requeues per job")
    a = p.parse_args(argv)
    run_dir = a.run_dir
    if a.manifest:
        lines = [ln.strip() for ln in Path(a.manifest).read_text().splitlines() if ln.strip()]
        run_dir = lines[a.index if a.index is not None else int(os.environ.get("SLURM_ARRAY_TASK_ID", "0"))]
    if not run_dir:
        p.error("give RUN_DIR or --manifest")
    port = a.port + (int(os.environ.get("SLURM_ARRAY_TASK_ID", "0")) % 1000 if a.mode != "single" else 0)
    return run_one(
        Path(run_dir),
        retry_failed=a.retry_failed,
        mode=a.mode,
        nodes=a.nodes,
        gpus=a.gpus,
        port=port,
        threads=a.threads,
        requeue=a.requeue,
        max_requeues=a.max_requeues,
        slurm_job=slurm_task() if a.manifest else None,
    )


if __name__ == "__main__":
    sys.exit(main())
