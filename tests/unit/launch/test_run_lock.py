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
import sys

from launch.run import worker
from launch.run.locks import RunLock
from launch.run.worker import start_trainer
from rundir.lock import is_locked, read_holder


def test_lock_lives_as_long_as_the_trainer_after_the_launcher_lets_go(work):
    lock = RunLock(work / "r", role="deepspeed")
    assert lock.acquire()
    log = open(work / "log", "ab")
    child = start_trainer(
        work / "r", [sys.executable, "-c", "import time; time.sleep(30)"], dict(os.environ), lock, log
    )
    try:
        lock.release()  # what a Ctrl-C'd launcher's cleanup does while its training goes on
        assert is_locked(work / "r"), "the lock was dropped while the trainer still runs"
        assert not RunLock(work / "r").acquire(wait_s=0.2)
    finally:
        child.kill()
        child.wait()
        log.close()
    assert not is_locked(work / "r")


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
