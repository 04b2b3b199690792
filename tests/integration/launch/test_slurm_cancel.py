"""Cancel and preemption on the real one-node Slurm (.ci/slurm_up.sh), W&B offline, each after the
run's first checkpoint:

- `sweep cancel`: scancel alone (no pid from a lock file is signalled); Slurm's SIGTERM reaches the
  trainer and W&B's service process; the trainer still checkpoints and exits 3 cleanly (no
  traceback), the worker does not requeue, the task ends for good, the run is `preempted`.
- preemption (SIGUSR1 to the batch shell, what `--signal=B:USR1@secs` sends): the task requeues
  itself and resumes from the signal's checkpoint; with `max_requeues: 1` a second preemption is
  not requeued; each decision is a line of `<run_dir>/requeues.jsonl`.
Skipped, with the reason, when Slurm is not installed or not up."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

import pytest

from tests.helpers import complete_checkpoint, metrics_steps, prepared_data, scalelab, summary, write_base, write_spec
from tests.integration.launch.test_slurm_sweep import cluster, job_id, wait_states  # noqa: F401 (cluster is a fixture)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("sbatch") is None, reason="Slurm client (sbatch) not installed: run .ci/slurm_up.sh"
    ),
]
OFFLINE = {"WANDB_MODE": "offline"}  # sbatch passes the submitting environment to the job


@pytest.fixture(scope="module")
def data():
    return prepared_data()


def offline_base(work, data, **train):
    base = write_base(work / "base", data, **train)
    base.write_text(base.read_text().replace("mode: disabled", "mode: offline"))
    return base


def wait_checkpoint(run_dir, min_step=1, timeout=300, also=None) -> int:
    t0 = time.time()
    while (step := complete_checkpoint(run_dir, min_step)) is None:
        assert time.time() - t0 < timeout, f"timed out waiting for a checkpoint >= {min_step} in {run_dir}" + (
            f": {also()}" if also else ""
        )
        time.sleep(0.05)
    return step


def show(task: str) -> str:
    return subprocess.run(["scontrol", "show", "job", task], capture_output=True, text=True).stdout


def start_requeued(task: str, timeout: float = 90) -> None:
    """Slurm holds a requeued job for a while (BeginTime); let it start now."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        if "JobState=PENDING" in show(task):
            time.sleep(3)  # not in the second its predecessor's credential was revoked
            subprocess.run(["scontrol", "update", f"JobId={task}", "StartTime=now"], capture_output=True)
            return
        time.sleep(0.5)
    pytest.fail(f"{task} was not requeued: {show(task)}")


def test_cancel_after_the_first_checkpoint_ends_the_task_cleanly(cluster, work, data):
    base = offline_base(work, data, steps=200000, checkpoint_every_steps=4, log_every_steps=2)
    spec = write_spec(
        work,
        {
            "name": "slcancel",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0],
            "runs_dir": str(work / "runs"),
            "executor": {"slurm": {"cpus_per_task": 1, "extra": ["--comment=scalelab cancel test"]}},
        },
    )
    run_dir = work / "runs" / "s0"
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", cwd=work, env=OFFLINE)
    assert r.returncode == 0, r.stdout + r.stderr
    task = job_id(r.stdout) + "_0"
    assert "Comment=scalelab cancel test" in show(task)  # a quoted directive value reached Slurm intact
    wait_checkpoint(run_dir, also=lambda: show(task))
    holder = json.loads((run_dir / ".lock").read_text())
    assert holder["slurm_job"] == task and holder["role"] == "worker"
    c = scalelab("sweep", "cancel", spec)
    assert c.returncode == 0, c.stdout + c.stderr
    assert f"scancel {task}" in c.stdout and "pid" not in c.stdout, c.stdout  # Slurm alone: no pid signalled
    rows = wait_states(spec, {"preempted", "failed", "done", "partial"}, timeout=180)
    assert rows[0]["state"] == "preempted", rows
    time.sleep(5)  # a requeued task would be back in the queue by now
    assert "JobState=CANCELLED" in show(task) or not show(task)
    assert "Restarts=0" in show(task) or not show(task)
    text = (run_dir / "train.log").read_text()
    assert "received SIGTERM: checkpoint step_" in text and "=== trainer exit code 3" in text, text[-3000:]
    assert "cancelled, not requeued" in text and "requeueing" not in text
    assert "Traceback" not in text, text[-3000:]
    # W&B's service died with the job's SIGTERM: at most a one-line warning, never a failure
    assert all(ln.startswith("warning: W&B") for ln in text.splitlines() if "ConnectionResetError" in ln), text[-3000:]
    s = summary(run_dir)
    assert s["status"] == "preempted" and s.get("error") is None
    assert (run_dir / "checkpoints" / f"step_{s['steps']}" / "COMPLETE").exists()
    assert not (run_dir / "requeues.jsonl").exists()
    assert (run_dir / "wandb").is_dir()


def test_preemption_requeues_and_resumes_at_most_max_requeues_times(cluster, work, data):
    base = offline_base(work, data, steps=200000, checkpoint_every_steps=4, log_every_steps=2)
    spec = write_spec(
        work,
        {
            "name": "slcap",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0],
            "runs_dir": str(work / "runs"),
            "executor": {"slurm": {"cpus_per_task": 1, "signal_secs": 60, "max_requeues": 1}},
        },
    )
    run_dir = work / "runs" / "s0"
    log = run_dir / "train.log"
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", cwd=work, env=OFFLINE)
    assert r.returncode == 0, r.stdout + r.stderr
    task = job_id(r.stdout) + "_0"
    wait_checkpoint(run_dir, also=lambda: show(task))
    subprocess.run(["scancel", "--signal=USR1", "--batch", task], check=True)
    t0 = time.time()
    while "requeueing" not in log.read_text():
        assert time.time() - t0 < 120, log.read_text()[-3000:]
        time.sleep(0.5)
    start_requeued(task)
    t0 = time.time()
    while "resumed from checkpoint" not in log.read_text():
        assert time.time() - t0 < 300, log.read_text()[-3000:]
        time.sleep(0.5)
    first = int(re.search(r"received SIGUSR1: checkpoint step_(\d+)", log.read_text()).group(1))
    assert f"resumed from checkpoint step_{first} " in log.read_text()  # the signal's own checkpoint
    wait_checkpoint(run_dir, first + 1)
    subprocess.run(["scancel", "--signal=USR1", "--batch", task], check=True)
    rows = wait_states(spec, {"preempted", "failed", "done", "partial"}, timeout=180)
    assert rows[0]["state"] == "preempted", rows
    time.sleep(5)
    assert "JobState=PENDING" not in show(task) and "JobState=RUNNING" not in show(task)
    text = log.read_text()
    assert text.count("=== trainer exit code 3") == 2 and "max_requeues=1" in text and "Traceback" not in text, text[
        -3000:
    ]
    recs = [json.loads(x) for x in (run_dir / "requeues.jsonl").read_text().splitlines()]
    assert [(x["job"], x["signal"], x["requeued"]) for x in recs] == [(task, "SIGUSR1", True), (task, "SIGUSR1", False)]
    assert recs[0]["step"] == first
    steps = metrics_steps(run_dir)
    assert steps == list(range(2, steps[-1] + 1, 2))  # continuous across the requeue: nothing lost or repeated
