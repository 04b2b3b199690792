"""Local executor end to end on tiny runs: two workers in parallel, idempotent relaunch, a lock
that keeps a second launch off a running run, resume after SIGKILL with nothing lost, and
--retry-failed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from launch.sweep.status import run_status
from tests.helpers import (
    children,
    holders,
    metrics_steps,
    prepared_data,
    requires_corpus,
    scalelab,
    summary,
    write_base,
    write_spec,
)

pytestmark = [pytest.mark.slow, requires_corpus]


@pytest.fixture(scope="module")
def data():
    return prepared_data()


def wait_for(pred, timeout=240, every=0.2):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(every)
    return False


def test_two_workers_in_parallel_then_idempotent_relaunch(work, data):
    base = write_base(work / "base", data)
    spec = write_spec(
        work,
        {
            "name": "par",
            "base": str(base),
            "kind": "grid",
            "runs_dir": str(work / "runs"),
            "axes": {"optim.lr": [1e-3, 3e-3]},
        },
    )
    r = scalelab("sweep", "launch", spec, "--workers", "2", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("start")]
    dones = [i for i, ln in enumerate(lines) if ln.startswith("done")]
    assert len(starts) == 2 and len(dones) == 2 and max(starts) < min(dones), r.stdout  # both ran at once
    for name in ("lr1e-3", "lr3e-3"):
        d = work / "runs" / name
        s = summary(d)
        assert s["status"] == "done" and s["steps"] == 12 and s["extras"]["sweep"] == "par"
        log = (d / "train.log").read_text()
        assert "train.threads=1" in log and "done: 12 steps" in log
    mtimes = {p: p.stat().st_mtime for p in (work / "runs").glob("*/summary.json")}
    t0 = time.time()
    r = scalelab("sweep", "launch", spec, "--workers", "2", cwd=work)
    assert r.returncode == 0 and r.stdout.count(": done") == 2 and "0 to run" in r.stdout
    assert time.time() - t0 < 20
    assert mtimes == {p: p.stat().st_mtime for p in (work / "runs").glob("*/summary.json")}
    st = scalelab("sweep", "status", spec, "--format", "json")
    assert [x["state"] for x in json.loads(st.stdout)] == ["done", "done"]
    lst = scalelab("runs", "list", work / "runs", "--format", "json")
    rows = json.loads(lst.stdout)
    assert sorted(x["optim.lr"] if "optim.lr" in x else x.get("axis.optim.lr") for x in rows) == [1e-3, 3e-3]


def test_lock_second_launch_and_resume_after_kill(work, data):
    base = write_base(work / "base", data, steps=200, checkpoint_every_steps=20, log_every_steps=5)
    spec = write_spec(
        work, {"name": "kill", "base": str(base), "kind": "seeds", "seeds": [0], "runs_dir": str(work / "runs")}
    )
    run_dir = work / "runs" / "s0"
    a = subprocess.Popen(
        [sys.executable, "-m", "launch.cli", "sweep", "launch", str(spec), "--no-progress"],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: (run_dir / "checkpoints" / "step_40" / "COMPLETE").exists()), "no checkpoint"
        # Frozen, the trainer (200 steps of ~16 ms) cannot finish while the second launch starts under
        # load: it did once in CI, and a done run is never "partial". It keeps its lock while stopped.
        trainers = [t["pid"] for t in json.loads((run_dir / ".lock").read_text())["trainers"]]
        assert trainers and all(pid not in children(a.pid) for pid in trainers)  # forked by the warm starter
        for pid in trainers:
            os.kill(pid, signal.SIGSTOP)
        assert run_status(run_dir).state == "running"
        # A second launch of the same sweep must not train the same run.
        b = scalelab("sweep", "launch", spec, cwd=work)
        assert b.returncode == 0 and "running under another launch" in b.stdout, b.stdout
        # kill -9 the launcher and its trainer (no checkpoint on the way out).
        os.kill(a.pid, signal.SIGKILL)
        for pid in trainers:
            os.kill(pid, signal.SIGKILL)
    finally:
        a.wait(30)
    assert wait_for(lambda: run_status(run_dir).state == "partial", timeout=20), (
        run_status(run_dir),
        holders(run_dir / ".lock"),
    )
    before = max(metrics_steps(run_dir))
    r = scalelab("sweep", "launch", spec, cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    s = summary(run_dir)
    assert s["status"] == "done" and s["steps"] == 200
    log = (run_dir / "train.log").read_text()
    assert "resumed from checkpoint step_" in log
    resumed_at = int(re.search(r"resumed from checkpoint step_(\d+)", log).group(1))
    assert resumed_at >= 40 and resumed_at <= before
    assert metrics_steps(run_dir) == list(range(5, 201, 5))  # continuous, nothing lost or repeated


def test_retry_failed_only_on_request(work, data):
    base = write_base(work / "base", data, steps=8)
    spec = write_spec(
        work, {"name": "nan", "base": str(base), "kind": "seeds", "seeds": [0], "runs_dir": str(work / "runs")}
    )
    run_dir = work / "runs" / "s0"
    r = scalelab("sweep", "launch", spec, cwd=work, env={"SCALELAB_FAULT_NAN_STEP": "3"})
    assert r.returncode == 1 and "FAILED s0" in r.stdout, r.stdout
    assert summary(run_dir)["status"] == "failed"
    st = scalelab("sweep", "status", spec)
    assert "failed" in st.stdout and "non-finite" in st.stdout
    attempts = (run_dir / "train.log").read_text().count("=== ")
    r = scalelab("sweep", "launch", spec, cwd=work)
    assert r.returncode == 1 and "use --retry-failed" in r.stdout
    assert (run_dir / "train.log").read_text().count("=== ") == attempts  # not restarted
    r = scalelab("sweep", "launch", spec, "--retry-failed", cwd=work)
    assert r.returncode == 0, r.stdout
    assert summary(run_dir)["status"] == "done"


def test_cancel_stops_a_local_launch_after_a_checkpoint(work, data):
    # 4000 steps (~60 s) so that the run cannot end before the cancel reaches it, however loaded the machine
    base = write_base(work / "base", data, steps=4000, checkpoint_every_steps=50, log_every_steps=5)
    spec = write_spec(
        work, {"name": "cancel", "base": str(base), "kind": "seeds", "seeds": [0], "runs_dir": str(work / "runs")}
    )
    run_dir = work / "runs" / "s0"
    a = subprocess.Popen(
        [sys.executable, "-m", "launch.cli", "sweep", "launch", str(spec), "--no-progress"],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: (run_dir / "metrics.jsonl").exists() and metrics_steps(run_dir)), "never started"
        c = scalelab("sweep", "cancel", spec)
        assert c.returncode == 0 and "SIGTERM launcher pid" in c.stdout, c.stdout
        out, _ = a.communicate(timeout=120)
    finally:
        if a.poll() is None:
            a.kill()
    assert a.returncode == 3, out
    assert summary(run_dir)["status"] == "preempted"
    assert "received SIGTERM: checkpoint step_" in (run_dir / "train.log").read_text()
    assert run_status(run_dir).state == "preempted"


def test_data_is_prepared_once_as_its_own_job_before_the_runs(work):
    import yaml

    data_dir = work / "data-tv300"  # a data set nothing has prepared yet
    base = write_base(work / "base", data_dir, steps=4)
    cfg = yaml.safe_load(base.read_text())
    cfg["data"].update({"name": "tv300", "tokenizer": {"kind": "bpe", "vocab_size": 300}})
    base.write_text(yaml.safe_dump(cfg))
    spec = write_spec(
        work,
        {
            "name": "prep",
            "base": str(base),
            "kind": "grid",
            "runs_dir": str(work / "runs"),
            "axes": {"optim.lr": [1e-3, 3e-3]},
        },
    )
    dry = scalelab("sweep", "launch", spec, "--dry-run", cwd=work)
    assert (
        dry.returncode == 0 and dry.stdout.startswith("first: scalelab data prepare ") and "for 2 run(s)" in dry.stdout
    )
    r = scalelab("sweep", "launch", spec, "--workers", "2", "--no-progress", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    prepares = [i for i, ln in enumerate(lines) if ln.startswith("prepare data 'tv300'")]
    starts = [i for i, ln in enumerate(lines) if ln.startswith("start")]
    assert len(prepares) == 1 and len(starts) == 2 and prepares[0] < min(starts), r.stdout
    assert "for 2 run(s) (no prepared data yet)" in lines[prepares[0]]
    logs = list((work / "runs" / ".sweep").glob("data-tv300-*.log"))
    assert len(logs) == 1 and "data 'tv300': built" in logs[0].read_text()
    for name in ("lr1e-3", "lr3e-3"):
        log = (work / "runs" / name / "train.log").read_text()
        assert "reusing prepared data" in log and "building" not in log
        assert summary(work / "runs" / name)["unique_tokens"] > 0
    (work / "runs" / "lr3e-3" / "summary.json").unlink()  # one run to redo; its data is ready
    again = scalelab("sweep", "launch", spec, "--no-progress", cwd=work)
    assert again.returncode == 0 and "prepare data" not in again.stdout, again.stdout
