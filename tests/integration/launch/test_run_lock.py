"""The run lock and who holds it: the lock outlives a launcher that lets go while its trainer
trains, a busy lock fails a worker (a requeued task must not "complete" a partial run) and
`sweep status` names the holder, `sweep cancel` signals only a process it can prove is still the
holder (pids are reused) and never a Slurm task's pid, and the worker requeues only after the
preemption signal, at most `max_requeues` times, recording each. No training: seconds."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launch.run.locks import RunLock
from launch.sweep.status import run_status
from rundir.lock import Holder, proc_start_ticks
from tests.helpers import scalelab, write_base, write_spec


def sleeper(seconds: int = 60) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])


def sweep_with_run(work: Path) -> tuple[Path, Path]:
    """A one-run sweep spec (never trained here) and its run directory, with a launch.yaml."""
    base = write_base(work / "base", work / "no-data")
    spec = write_spec(
        work, {"name": "lk", "base": str(base), "kind": "seeds", "seeds": [0], "runs_dir": str(work / "runs")}
    )
    run_dir = work / "runs" / "s0"
    run_dir.mkdir(parents=True)
    (run_dir / "launch.yaml").write_text(base.read_text())
    return spec, run_dir


def test_busy_lock_fails_the_worker_and_status_names_the_holder(work):
    spec, run_dir = sweep_with_run(work)
    lock = RunLock(run_dir, role="local")
    assert lock.acquire()
    try:
        r = subprocess.run(
            [sys.executable, "-m", "launch.run.worker", str(run_dir)], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 1, r.stdout + r.stderr
        who = f"{socket.gethostname()} pid {os.getpid()}"
        assert "held by another launch" in r.stderr and who in r.stderr, r.stderr
        st = run_status(run_dir)
        assert st.state == "running" and st.held_by == who
        s = scalelab("sweep", "status", spec, "--format", "json")
        assert s.returncode == 0, s.stderr
        [row] = json.loads(s.stdout)
        assert row["state"] == "running" and row["held_by"] == who
        s = scalelab("sweep", "status", spec)
        assert "held by" in s.stdout and who in s.stdout, s.stdout
    finally:
        lock.release()
    assert run_status(run_dir).held_by is None


def _hold_with_record(run_dir: Path, text: str) -> RunLock:
    lock = RunLock(run_dir)
    assert lock.acquire()
    os.ftruncate(lock.fd, 0)
    os.pwrite(lock.fd, text.encode(), 0)
    return lock


@pytest.mark.parametrize("record", ["old-format", "other-start-time"])
def test_cancel_never_signals_a_pid_that_is_no_longer_the_holder(work, record):
    """The recorded launcher died and its pid now belongs to an unrelated process."""
    spec, run_dir = sweep_with_run(work)
    victim = sleeper()
    try:
        if record == "old-format":  # what today's launches wrote: host pid time, no identity
            text = f"{socket.gethostname()} {victim.pid} {time.time():.0f}\n"
        else:
            h = read_holder_for(victim.pid)
            h.start_ticks -= 1  # the holder was an earlier process with the same pid
            text = h.to_json() + "\n"
        lock = _hold_with_record(run_dir, text)
        try:
            c = scalelab("sweep", "cancel", spec)
        finally:
            lock.release()
        assert c.returncode == 0, c.stderr
        assert "not signalled" in c.stdout, c.stdout
        time.sleep(0.3)
        assert victim.poll() is None, "an unrelated process was killed"
    finally:
        victim.kill()
        victim.wait()


def read_holder_for(pid: int) -> Holder:
    """The record a launch with this pid would write, identity included."""
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    return Holder(
        host=socket.gethostname(),
        pid=pid,
        since=time.time(),
        start_ticks=proc_start_ticks(pid),
        boot_id=boot,
        role="local",
    )


def test_cancel_signals_the_verified_holder_but_never_a_slurm_tasks_pid(work):
    spec, run_dir = sweep_with_run(work)
    victim = sleeper()
    try:
        h = read_holder_for(victim.pid)
        h.slurm_job = "4242424_0"  # a Slurm task's worker: scancel's business, wherever its pid is
        lock = _hold_with_record(run_dir, h.to_json() + "\n")
        try:
            c = scalelab("sweep", "cancel", spec, env={"PATH": os.path.dirname(sys.executable)})  # no scancel here
        finally:
            lock.release()
        assert c.returncode == 0, c.stderr
        assert "scancel 4242424_0" in c.stdout, c.stdout
        time.sleep(0.3)
        assert victim.poll() is None, "a Slurm task's pid was signalled from the login node"
        h.slurm_job = None
        lock = _hold_with_record(run_dir, h.to_json() + "\n")
        try:
            c = scalelab("sweep", "cancel", spec)
        finally:
            lock.release()
        assert f"SIGTERM launcher pid {victim.pid}" in c.stdout, c.stdout
        assert victim.wait(10) == -signal.SIGTERM
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
