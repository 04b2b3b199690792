"""A stop signal during a run's start-up (importing torch and DeepSpeed, preparing data) stops the
run, never fails it: the trainer itself (exit 3 once its early handler is in), and the local,
DeepSpeed and Slurm-worker launchers when the signal they forwarded killed a trainer before
Python could install any handler."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import (
    REPO,
    metrics_steps,
    prepared_data,
    requires_corpus,
    scalelab,
    start,
    summary,
    write_base,
    write_spec,
)

pytestmark = requires_corpus  # its fixtures train on the bundled corpus


def catches(pid: int, sig: int) -> bool:
    """True once process `pid` has a handler installed for `sig` (SigCgt in /proc/PID/status)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except FileNotFoundError:
        pass
    return False


@pytest.fixture(scope="module")
def data():
    return prepared_data()


def test_trainer_stopped_while_starting_exits_3_and_reruns(data, tmp_path):
    base = write_base(tmp_path / "base", data)
    proc = start(["train", base, "--run-dir", "run", "--no-progress"], tmp_path)
    t0 = time.time()
    while not catches(proc.pid, signal.SIGTERM):  # the early handler is in; torch is still importing
        assert proc.poll() is None and time.time() - t0 < 60, "the trainer never installed its handler"
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, out
    assert "received SIGTERM before training started: stopped" in out
    assert not (tmp_path / "run" / "summary.json").exists() or summary(tmp_path / "run")["status"] != "failed"
    r = scalelab("train", base, "--run-dir", "run", "--no-progress", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert summary(tmp_path / "run")["status"] == "done" and metrics_steps(tmp_path / "run")[-1] == 12


def test_local_launch_stopped_as_a_run_starts_counts_it_stopped(data, work):
    base = write_base(work / "base", data)
    spec = write_spec(
        work,
        {
            "name": "early",
            "base": str(base),
            "kind": "grid",
            "runs_dir": str(work / "runs"),
            "axes": {"optim.lr": [3e-3]},
        },
    )
    a = subprocess.Popen(
        [sys.executable, "-m", "launch.cli", "sweep", "launch", str(spec), "--no-progress"],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        lines = []
        for line in a.stdout:  # SIGTERM the launcher the moment it has started the trainer
            lines.append(line)
            if line.startswith("start"):
                os.kill(a.pid, signal.SIGTERM)
                break
        out = "".join(lines) + a.communicate(timeout=120)[0]
    finally:
        if a.poll() is None:
            a.kill()
    assert a.returncode == 3, out
    assert "stopped lr3e-3" in out and "FAILED" not in out
    run = work / "runs" / "lr3e-3"
    assert not (run / "summary.json").exists() or summary(run)["status"] != "failed"
    r = scalelab("sweep", "launch", spec, cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert summary(run)["status"] == "done" and metrics_steps(run)[-1] == 12


def test_slurm_worker_stopped_as_it_starts_the_trainer_exits_3(data, work):
    """`python -m launch.run.worker` (what a Slurm array task runs): SIGTERM right after it opened the
    run's log, before or as the trainer starts."""
    base = write_base(work / "base", data)
    spec = write_spec(
        work,
        {"name": "wk", "base": str(base), "kind": "grid", "runs_dir": str(work / "runs"), "axes": {"optim.lr": [3e-3]}},
    )
    assert scalelab("sweep", "plan", spec, cwd=work).returncode == 0
    run = work / "runs" / "lr3e-3"
    from launch.run.worker import write_launch_config
    from launch.sweep.expand import plan as expand

    for r in expand(spec).runs:
        Path(r.run_dir).mkdir(parents=True, exist_ok=True)
        write_launch_config(r)
    w = subprocess.Popen(
        [sys.executable, "-m", "launch.run.worker", str(run)],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    t0 = time.time()
    while not ((run / "train.log").exists() and "worker pid" in (run / "train.log").read_text()):
        assert w.poll() is None and time.time() - t0 < 60
        time.sleep(0.002)
    w.send_signal(signal.SIGTERM)
    out, _ = w.communicate(timeout=120)
    assert w.returncode == 3, out + (run / "train.log").read_text()
    assert not (run / "summary.json").exists() or summary(run)["status"] != "failed"
    w = subprocess.run(
        [sys.executable, "-m", "launch.run.worker", str(run)],
        cwd=work,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert w.returncode == 0, w.stdout + w.stderr
    assert summary(run)["status"] == "done"
