"""`--executor deepspeed` (the real DeepSpeed launcher, one-host hostfile, CPU): Ctrl-C asks the
training to checkpoint and stop, and the run's lock stays held until the last rank has exited
(the lock was shared with the launcher subprocess and used to be dropped at once while the
ranks trained on)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rundir.lock import is_locked
from tests.helpers import complete_checkpoint, free_port, prepared_data, requires_corpus, write_base, write_spec

pytestmark = pytest.mark.slow


def ranks(run_dir: Path) -> list[int]:
    """Live trainer ranks of this run (started by DeepSpeed's launch.py as `python -u -m pretrain.cli ...`)."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
            state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (
            state != "Z"
            and b"pretrain.cli" in argv
            and str(run_dir).encode() in b" ".join(argv)
            and not any(b"deepspeed" in a for a in argv)
        ):
            out.append(int(p.name))
    return out


@requires_corpus
def test_ctrl_c_stops_the_training_and_keeps_the_lock_until_the_ranks_exit(work):
    data = prepared_data()
    base = write_base(work / "base", data, steps=200000, checkpoint_every_steps=4, log_every_steps=2)
    hostfile = work / "hostfile"
    hostfile.write_text("localhost slots=1\n")
    spec = write_spec(
        work,
        {
            "name": "dsc",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0],
            "runs_dir": str(work / "runs"),
            "executor": {"deepspeed": {"hostfile": str(hostfile), "master_port": free_port()}},
        },
    )
    run_dir = (work / "runs" / "s0").resolve()
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    a = subprocess.Popen(
        [sys.executable, "-m", "launch.cli", "sweep", "launch", str(spec), "--executor", "deepspeed"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        t0 = time.time()
        while complete_checkpoint(run_dir) is None:
            assert a.poll() is None and time.time() - t0 < 400, (
                a.stdout.read() if a.poll() is not None else "no checkpoint"
            )
            time.sleep(0.05)
        assert ranks(run_dir) and is_locked(run_dir)
        os.kill(a.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the launch, not the ranks' session
        t0 = time.time()
        while ranks(run_dir):
            assert is_locked(run_dir), "the run's lock was released while its training still runs"
            assert time.time() - t0 < 120, "the training did not stop"
            time.sleep(0.05)
        out, _ = a.communicate(timeout=60)
    finally:
        if a.poll() is None:
            os.killpg(a.pid, signal.SIGKILL)
            a.wait()
    assert a.returncode == 3, out
    assert "SIGINT: asking the running training to checkpoint and stop" in out and "stopped s0" in out, out
    assert not is_locked(run_dir)
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["status"] == "preempted"
    assert (run_dir / "checkpoints" / f"step_{s['steps']}" / "COMPLETE").exists()
    assert "received SIGTERM: checkpoint step_" in (run_dir / "train.log").read_text()
