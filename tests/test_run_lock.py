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
from conftest import scalelab, write_base, write_spec

from launch import worker
from launch.locks import RunLock
from rundir.lock import Holder, is_locked, proc_start_ticks, read_holder
from launch.status import run_status
from launch.worker import start_trainer


def sleeper(seconds: int = 60) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])


def sweep_with_run(work: Path) -> tuple[Path, Path]:
    """A one-run sweep spec (never trained here) and its run directory, with a launch.yaml."""
    base = write_base(work / "base", work / "no-data")
    spec = write_spec(work, {"name": "lk", "base": str(base), "kind": "seeds", "seeds": [0], "runs_dir": str(work / "runs")})
    run_dir = work / "runs" / "s0"
    run_dir.mkdir(parents=True)
    (run_dir / "launch.yaml").write_text(base.read_text())
    return spec, run_dir


def test_lock_lives_as_long_as_the_trainer_after_the_launcher_lets_go(work):
    lock = RunLock(work / "r", role="deepspeed")
    assert lock.acquire()
    log = open(work / "log", "ab")
    child = start_trainer(work / "r", [sys.executable, "-c", "import time; time.sleep(30)"], dict(os.environ), lock, log)
    try:
        lock.release()  # what a Ctrl-C'd launcher's cleanup does while its training goes on
        assert is_locked(work / "r"), "the lock was dropped while the trainer still runs"
        assert not RunLock(work / "r").acquire(wait_s=0.2)
    finally:
        child.kill()
        child.wait()
        log.close()
    assert not is_locked(work / "r")


def test_busy_lock_fails_the_worker_and_status_names_the_holder(work):
    spec, run_dir = sweep_with_run(work)
    lock = RunLock(run_dir, role="local")
    assert lock.acquire()
    try:
        r = subprocess.run([sys.executable, "-m", "launch.worker", str(run_dir)], capture_output=True, text=True, timeout=60)
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
    return Holder(host=socket.gethostname(), pid=pid, since=time.time(), start_ticks=proc_start_ticks(pid), boot_id=boot,
                  role="local")


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


def test_lock_record_names_host_pid_identity_and_trainers(work):
    lock = RunLock(work / "r", role="worker", slurm_job="77_3")
    assert lock.acquire()
    try:
        lock.add_trainers([os.getpid()])
        h = read_holder(work / "r")
        assert (h.host, h.pid, h.role, h.slurm_job) == (socket.gethostname(), os.getpid(), "worker", "77_3")
        assert h.is_live_here() and h.is_live_here(h.trainers[0])
        assert h.describe() == f"{socket.gethostname()} pid {os.getpid()} (Slurm job 77_3)"
    finally:
        lock.release()


def test_only_the_preemption_signal_requeues_and_at_most_max_requeues_times(work):
    run_dir = work / "r"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text(json.dumps({"status": "preempted", "steps": 40}))
    again, msg = worker.after_stop(run_dir, [signal.SIGTERM], "9_0", requeue=True, max_requeues=3)
    assert not again and "not requeued" in msg
    again, _ = worker.after_stop(run_dir, [signal.SIGUSR1, signal.SIGTERM], "9_0", requeue=True, max_requeues=3)
    assert not again  # cancelled after the warning signal: the cancel wins
    assert not (run_dir / "requeues.jsonl").exists()
    for i in range(3):
        again, msg = worker.after_stop(run_dir, [signal.SIGUSR1], "9_0", requeue=True, max_requeues=3)
        assert again and f"({i + 1} of at most 3)" in msg
    again, msg = worker.after_stop(run_dir, [signal.SIGUSR1], "9_0", requeue=True, max_requeues=3)
    assert not again and "max_requeues=3" in msg
    recs = [json.loads(x) for x in (run_dir / "requeues.jsonl").read_text().splitlines()]
    assert [r["requeued"] for r in recs] == [True, True, True, False]
    assert all(r["job"] == "9_0" and r["signal"] == "SIGUSR1" and r["step"] == 40 for r in recs)
    # A new launch is a new job: its own budget.
    again, _ = worker.after_stop(run_dir, [signal.SIGUSR1], "10_0", requeue=True, max_requeues=3)
    assert again
