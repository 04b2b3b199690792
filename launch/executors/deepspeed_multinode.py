"""Multi-node `deepspeed` with a user hostfile, for clusters without Slurm.

Runs execute one after another, each over all hosts of the hostfile (the DeepSpeed launcher
reaches the other nodes through pdsh/ssh, or `launcher: openmpi` etc.). The run directory must
be on a filesystem every node sees. Locks, skipping and train.log work as for the other executors.
Data sets the runs need are prepared first, once each, on this host (`launch.data_jobs`).
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

from pretrain.errors import ConfigError

from launch.locks import RunLock
from launch.worker import EXIT_OK, LAUNCH_CONFIG, decide, open_log, start_trainer, write_launch_config


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
    argv = ["deepspeed", "--hostfile", str(ds.hostfile), "--launcher", ds.launcher,
            "--master_addr", ds.master_addr or hosts[0][0], "--master_port", str(ds.master_port)]
    if ds.num_nodes:
        argv += ["--num_nodes", str(ds.num_nodes)]
    if ds.num_gpus:
        argv += ["--num_gpus", str(ds.num_gpus)]
    return argv + ["--module", python_module, str(Path(run_dir).resolve() / LAUNCH_CONFIG), "--run-dir", str(Path(run_dir).resolve())]


class DeepSpeedExecutor:
    def __init__(self, spec):
        self.spec = spec
        self.ds = spec.executor.deepspeed

    def launch(self, runs: list, retry_failed: bool = False, dry_run: bool = False, out=sys.stdout) -> dict:
        import os

        done, failed, skipped = [], [], {}
        blocked: dict[str, str] = {}
        if not dry_run:
            from launch.data_jobs import data_jobs, run_locally
            from launch.executors.slurm import sweep_meta_dir

            todo = [r for r in runs if decide(Path(r.run_dir), retry_failed, r.id) == "run"]
            jobs = data_jobs(todo)
            if jobs:
                blocked = run_locally(jobs, sweep_meta_dir(self.spec.runs_root().resolve()), lambda m: out.write(m + "\n"))
        for r in runs:
            if r.name in blocked:
                failed.append(r.name)
                out.write(f"FAILED {r.name}: {blocked[r.name]}\n")
                continue
            run_dir = Path(r.run_dir)
            argv = command(self.ds, run_dir)
            if dry_run:
                out.write(" ".join(shlex.quote(a) for a in argv) + "\n")
                continue
            what = decide(run_dir, retry_failed, r.id)
            if what != "run":
                skipped[r.name] = what
                continue
            run_dir.mkdir(parents=True, exist_ok=True)
            lock = RunLock(run_dir)
            if not lock.acquire():
                skipped[r.name] = "running under another launch"
                continue
            try:
                write_launch_config(r)
                log = open_log(run_dir, "deepspeed: " + " ".join(argv))
                out.write(f"start  {r.name} -> {run_dir / 'train.log'}\n")
                out.flush()
                code = start_trainer(run_dir, argv, dict(os.environ), lock, log).wait()
                log.write(f"=== trainer exit code {code}\n".encode())
                log.close()
            finally:
                lock.release()
            (done if code == EXIT_OK else failed).append(r.name)
            out.write(f"{'done  ' if code == EXIT_OK else 'FAILED'} {r.name} (exit {code})\n")
        return {"done": done, "failed": failed, "skipped": skipped}
