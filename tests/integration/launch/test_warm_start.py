"""Warm start (`executor.local.warm_start`): CPU trainers forked from one process that imported
torch and DeepSpeed. A forked trainer is what a new process would be (session, descriptors,
signal handlers, stdout), trains the same losses bit for bit and stops the same; a
server that dies leaves its trainers running and the launch finishes on new processes; a
server whose imports fail is reported and the launch starts new processes."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from launch.run.warm_start import WarmStarter
from tests.helpers import (
    REPO,
    children,
    metrics,
    prepared_data,
    requires_corpus,
    scalelab,
    start,
    summary,
    write_base,
    write_spec,
)

pytestmark = [pytest.mark.slow, requires_corpus]


@pytest.fixture(scope="module")
def data():
    return prepared_data()


def sweep(work: Path, data: Path, name: str, warm: bool, seeds=(0, 1), **train) -> Path:
    base = write_base(work / f"base-{name}", data, **train)
    return write_spec(
        work,
        {
            "name": name,
            "base": str(base),
            "kind": "seeds",
            "seeds": list(seeds),
            "runs_dir": str(work / name),
            "executor": {"local": {"workers": 1, "warm_start": warm}},
        },
    )


def trainer_of(run: Path, timeout: float = 120) -> int:
    """The pid of the run's trainer, from its lock's record, once it has logged a step."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            if (run / "metrics.jsonl").read_text().strip():
                return json.loads((run / ".lock").read_text())["trainers"][0]["pid"]
        except (OSError, ValueError, KeyError, IndexError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{run} never logged a step")


def looks(pid: int) -> dict:
    """What a process is to the outside: session, group, signal dispositions, descriptors."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    status = dict(ln.split(":\t", 1) for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in ln)
    fds = {}
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            fds[int(fd.name)] = os.readlink(fd)
        except OSError:
            pass
    return {
        "pgid": int(stat[2]),
        "sid": int(stat[3]),
        "ignored": status["SigIgn"],
        "caught": status["SigCgt"],
        "fds": fds,
    }


def files(fds: dict, run: Path) -> list[str]:
    """The run's own files a process has open, by name (numbers differ by the order of opening); a
    checkpoint being written at that moment is left out."""
    return sorted(Path(t).name for t in fds.values() if t.startswith(str(run)) and "/checkpoints/" not in t)


def test_a_forked_trainer_is_what_a_new_process_would_be_and_trains_the_same(work, data):
    seen = {}
    for warm in (True, False):
        name = "warm" if warm else "cold"
        spec = sweep(work, data, name, warm, seeds=(0,), steps=3000, checkpoint_every_steps=50, log_every_steps=5)
        a = start(["sweep", "launch", spec, "--no-progress"], work)
        try:
            run = work / name / "s0"
            pid = trainer_of(run)
            seen[name] = looks(pid)
            assert (pid in children(a.pid)) is not warm  # forked by the server, not by the launcher
            os.kill(a.pid, signal.SIGTERM)  # a stop forwarded to the trainer's group: checkpoint, exit 3
            out, _ = a.communicate(timeout=120)
        finally:
            if a.poll() is None:
                a.kill()
        assert a.returncode == 3 and "stopped s0 after a checkpoint" in out, out
        assert summary(run)["status"] == "preempted"
        header = (run / "train.log").read_text().splitlines()[0]
        assert ("(forked by the warm starter)" in header) is warm, header
    warm, cold = seen["warm"], seen["cold"]
    for s in (warm, cold):
        assert s["pgid"] == s["sid"] and s["sid"] not in (os.getpid(), os.getsid(0))  # a session of its own
    assert (warm["ignored"], warm["caught"]) == (cold["ignored"], cold["caught"])  # the trainer's own handlers
    assert files(warm["fds"], work / "warm") == files(cold["fds"], work / "cold")
    assert Path(warm["fds"][0]).name == "null" and Path(warm["fds"][1]).name == "train.log" == Path(warm["fds"][2]).name
    # the run lock's descriptor, no other of the launcher's
    assert files(warm["fds"], work / "warm").count(".lock") == 1

    def sockets(s):
        return sum(t.startswith("socket:") for t in s["fds"].values())

    assert sockets(warm) == sockets(cold)  # the server's socket is not among them

    # fresh 2-run sweeps, forked and new processes, train the same losses bit for bit
    for name, warm_start in (("pair-warm", True), ("pair-cold", False)):
        r = scalelab("sweep", "launch", sweep(work, data, name, warm_start), cwd=work)
        assert r.returncode == 0 and "2 done" in r.stdout, r.stdout + r.stderr
    for seed in ("s0", "s1"):
        a, b = metrics(work / "pair-warm" / seed), metrics(work / "pair-cold" / seed)
        assert [(m["step"], m["loss"]) for m in a] == [(m["step"], m["loss"]) for m in b]


def test_a_dead_warm_starter_leaves_its_trainer_running_and_the_launch_goes_on_cold(work, data):
    spec = sweep(work, data, "dies", True, steps=300, checkpoint_every_steps=50, log_every_steps=5)
    a = start(["sweep", "launch", spec, "--no-progress"], work)
    try:
        first = trainer_of(work / "dies" / "s0")
        server = [c for c in children(a.pid) if b"launch.run.warm_server" in Path(f"/proc/{c}/cmdline").read_bytes()]
        assert len(server) == 1
        os.kill(server[0], signal.SIGKILL)
        out, _ = a.communicate(timeout=300)
    finally:
        if a.poll() is None:
            a.kill()
    assert a.returncode == 0, out
    assert "warm start off: the warm starter" in out, out  # said once, before the next run starts
    assert "done   s0" in out and "done   s1" in out, out  # s0's end read from its run directory
    assert summary(work / "dies" / "s0")["status"] == "done" and summary(work / "dies" / "s1")["status"] == "done"
    assert first not in children(a.pid)
    assert "(forked by the warm starter)" not in (work / "dies" / "s1" / "train.log").read_text()


def test_a_warm_starter_whose_imports_fail_says_why_and_starts_nothing(tmp_path):
    broken = tmp_path / "site"
    (broken / "deepspeed").mkdir(parents=True)
    (broken / "deepspeed" / "__init__.py").write_text("raise ImportError('no DeepSpeed here')\n")
    w = WarmStarter({**os.environ, "PYTHONPATH": os.pathsep.join([str(broken), str(REPO)])})
    try:
        assert not w.wait_ready(timeout=120)
        assert "its imports failed" in w.why and "no DeepSpeed here" in w.why, w.why
        assert w.start([sys.executable, "-m", "pretrain.cli", "x.yaml"], {}, str(tmp_path), 1, 2, tmp_path) is None
    finally:
        w.close()
    assert w.proc.returncode == 1


def test_a_wrong_value_is_named_before_anything_runs(tmp_path):
    spec = tmp_path / "s.yaml"
    local = {"warm_start": "maybe"}
    base = str(REPO / "configs" / "train" / "tiny.yaml")
    spec.write_text(
        yaml.safe_dump({"name": "x", "base": base, "kind": "seeds", "seeds": [0], "executor": {"local": local}})
    )
    r = scalelab("sweep", "launch", spec, cwd=tmp_path)
    assert r.returncode == 2 and "executor.local.warm_start" in r.stdout + r.stderr, r.stdout + r.stderr
    assert not (tmp_path / "runs").exists()


def test_a_launch_stopped_while_its_warm_starter_imports_starts_nothing_and_exits_3(work, data):
    spec = sweep(work, data, "early", True)
    a = start(["sweep", "launch", spec, "--no-progress"], work)
    try:
        lines = []
        for line in a.stdout:  # the executor is up; the warm starter is importing torch (seconds)
            lines.append(line)
            if line.startswith("local executor:"):
                os.kill(a.pid, signal.SIGTERM)
                break
        out = "".join(lines) + a.communicate(timeout=120)[0]
    finally:
        if a.poll() is None:
            a.kill()
    assert a.returncode == 3, out
    assert "not started (stopped): s0, s1" in out and "start  s0" not in out, out
    assert not (work / "early" / "s0" / "train.log").exists()
    r = scalelab("sweep", "launch", spec, cwd=work)
    assert r.returncode == 0 and "2 done" in r.stdout, r.stdout + r.stderr
