"""Multi-node `deepspeed` with a user hostfile, for clusters without Slurm.

Runs execute one after another, each over all hosts of the hostfile (the DeepSpeed launcher
reaches the other nodes through pdsh/ssh, or `launcher: openmpi` etc.). The run directory must
be on a filesystem every node sees. The variables the ranks need (SCALELAB_*, HF_*, WANDB_*,
OMP_*, PATH, ...) reach the other hosts through `<run_dir>/.deepspeed_env` (DS_ENV_FILE).
Locks, skipping and train.log work as for the other executors.
Data sets the runs need are prepared first, once each, on this host (`launch.sweep.data_jobs`).

Ctrl-C / SIGTERM asks the running training to checkpoint and stop (SIGTERM to its process group;
DeepSpeed's launcher passes it to the ranks and kills any that take over 30 s), starts no further
run, and keeps the run's lock until every process of the training on this host has exited: the
launcher's own exit (the DeepSpeed runner dies at once on SIGTERM) does not end the training.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from pathlib import Path

from launch.executors.slurm import sweep_meta_dir
from launch.run.ds_env import write_env_file
from launch.run.worker import EXIT_OK, EXIT_STOPPED, claim, start_or_skip, start_trainers, write_launch_config
from launch.sweep import depends
from launch.sweep.data_jobs import data_jobs, run_locally
from pretrain.errors import ConfigError
from rundir.layout import LAUNCH_CONFIG, SUMMARY, TRAIN_LOG
from rundir.lock import proc_stat
from rundir.summary import read_summary


def read_hostfile(path: str | Path) -> list[tuple[str, int]]:
    hosts = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        slots = 1
        for p in parts[1:]:
            if p.startswith("slots="):
                slots = int(p[6:])
        hosts.append((parts[0], slots))
    if not hosts:
        raise ConfigError(f"hostfile {path} lists no hosts")
    return hosts


def command(ds, run_dir: Path, python_module: str = "pretrain.cli") -> list[str]:
    if not ds.hostfile:
        raise ConfigError("executor.deepspeed.hostfile is required (or pass --hostfile)")
    hosts = read_hostfile(ds.hostfile)
    argv = [
        "deepspeed",
        "--hostfile",
        str(ds.hostfile),
        "--launcher",
        ds.launcher,
        "--master_addr",
        ds.master_addr or hosts[0][0],
        "--master_port",
        str(ds.master_port),
    ]
    if ds.num_nodes:
        argv += ["--num_nodes", str(ds.num_nodes)]
    if ds.num_gpus:
        argv += ["--num_gpus", str(ds.num_gpus)]
    if len(hosts) == 1:  # one node: DeepSpeed launches locally, its ssh probe would only fail without sshd
        argv.append("--no_ssh_check")
    return argv + [
        "--module",
        python_module,
        str(Path(run_dir).resolve() / LAUNCH_CONFIG),
        "--run-dir",
        str(Path(run_dir).resolve()),
    ]


def group_alive(pgid: int) -> bool:
    """True while a live (non-zombie) process of process group `pgid` remains on this host.

    /proc, not killpg(pgid, 0): orphaned ranks may linger as zombies where PID 1 does not reap."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = proc_stat(int(entry.name))
        if fields is not None and len(fields) > 2 and fields[0] != "Z" and fields[2] == str(pgid):
            return True
    return False


def summary_stamp(run_dir: Path) -> tuple | None:
    """What identifies the summary.json written last (None: none yet); compared, not clock-read,
    since a rank on another node writes it through a shared file system."""
    try:
        st = (Path(run_dir) / SUMMARY).stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def outcome(run_dir: Path, code: int, stopping: bool, before: tuple | None) -> int:
    """The run's exit code; after a stop the launcher's own code says little (the runner exits 1
    on SIGTERM), so the summary.json this attempt wrote decides: preempted -> 3, done -> 0,
    failed -> the code. No summary from this attempt: the ranks were stopped while starting,
    before training (`scalelab train` exits 3 then, or died of the signal), so the run is stopped."""
    if not stopping or code in (EXIT_OK, EXIT_STOPPED):
        return code
    if summary_stamp(run_dir) in (None, before):
        return EXIT_STOPPED
    status = (read_summary(run_dir) or {}).get("status")
    return {"preempted": EXIT_STOPPED, "done": EXIT_OK}.get(status, code)


class DeepSpeedExecutor:
    def __init__(self, spec):
        self.spec = spec
        self.ds = spec.executor.deepspeed

    def launch(self, runs: list, retry_failed: bool = False, dry_run: bool = False, out=None) -> dict:
        out = out or sys.stdout  # read now: the default would pin the stdout of import time
        done, failed, stopped, skipped = [], [], [], {}
        blocked: dict[str, str] = {}
        if not dry_run:
            todo = [r for r in runs if start_or_skip(Path(r.run_dir), retry_failed, r.id) == "run"]
            jobs = data_jobs(todo)
            if jobs:
                blocked = run_locally(
                    jobs, sweep_meta_dir(self.spec.runs_root().resolve()), lambda m: out.write(m + "\n")
                )
        state = {"stop": False, "proc": None}

        def on_signal(signum, frame):
            if not state["stop"]:
                out.write(f"{signal.Signals(signum).name}: asking the running training to checkpoint and stop\n")
                out.flush()
            state["stop"] = True
            proc = state["proc"]
            if proc is not None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

        old = {} if dry_run else {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for r in runs:
                if state["stop"]:
                    skipped[r.name] = "not started: the launch was stopped"
                    continue
                if r.name in blocked:
                    failed.append(r.name)
                    out.write(f"FAILED {r.name}: {blocked[r.name]}\n")
                    continue
                run_dir = Path(r.run_dir)
                argv = command(self.ds, run_dir)
                if dry_run:
                    out.write(" ".join(shlex.quote(a) for a in argv) + "\n")
                    continue
                run_dir.mkdir(parents=True, exist_ok=True)
                lock, what = claim(run_dir, "deepspeed", retry_failed, r.id)
                if what != "run":
                    skipped[r.name] = "running under another launch" if what == "busy" else what
                    continue
                if not depends.may_start(r):  # runs go one at a time in plan order: a parent has ended by now
                    lock.release()
                    failed.append(r.name)
                    out.write(
                        f"FAILED {r.name}: waits for {depends.parent_checkpoint(r)}, which {r.after[0]} did not write\n"
                    )
                    continue
                try:
                    write_launch_config(r)
                    out.write(f"start  {r.name} -> {run_dir / TRAIN_LOG}\n")
                    out.flush()
                    before = summary_stamp(run_dir)
                    env = {**os.environ, "DS_ENV_FILE": str(write_env_file(run_dir).resolve())}
                    (proc,), log = start_trainers(run_dir, lock, [(argv, env)], "deepspeed: " + " ".join(argv))
                    state["proc"] = proc
                    code = proc.wait()
                    # The launcher may be gone while its ranks still train (and checkpoint): hold on.
                    while group_alive(proc.pid):
                        time.sleep(0.2)
                    state["proc"] = None
                    code = outcome(run_dir, code, state["stop"], before)
                    log.write(f"=== trainer exit code {code}\n".encode())
                    log.close()
                finally:
                    lock.release()
                if code == EXIT_OK:
                    done.append(r.name)
                    out.write(f"done   {r.name}\n")
                elif code == EXIT_STOPPED:
                    stopped.append(r.name)
                    out.write(f"stopped {r.name} after a checkpoint (relaunch resumes it)\n")
                else:
                    failed.append(r.name)
                    out.write(f"FAILED {r.name} (exit {code})\n")
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        return {"done": done, "failed": failed, "stopped": stopped, "skipped": skipped}
