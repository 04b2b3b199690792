"""The Slurm executor against a real one-node cluster (.ci/slurm_up.sh): a 4-run job array end
to end, and a preempted task (SIGUSR1 to the batch shell) that checkpoints, requeues itself and
resumes with nothing lost. Skipped, with the reason, when Slurm is not installed or not up."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

import pytest

from tests.helpers import metrics_steps, prepared_data, scalelab, summary, write_base, write_spec
from tests.helpers.ci_gate import unavailable

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    # skipped with the reason in a developer's `make test`; a failure in CI (SCALELAB_REQUIRE, tests/helpers/ci_gate.py)
    if shutil.which("sbatch") is None:
        unavailable("slurm", "Slurm client (sbatch) not installed: run .ci/slurm_up.sh")
    r = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], capture_output=True, text=True)
    states = r.stdout.split()
    if r.returncode != 0 or not any(s.rstrip("*") in ("idle", "mix", "alloc") for s in states):
        unavailable(
            "slurm", f"no usable Slurm node (sinfo: {r.stdout.strip() or r.stderr.strip()}): run .ci/slurm_up.sh"
        )
    return True


@pytest.fixture(scope="module")
def data():
    return prepared_data()


def job_id(stdout: str) -> str:
    m = re.search(r"submitted job array (\d+)", stdout)
    assert m, stdout
    return m.group(1)


def wait_states(spec, want: set[str], timeout: float) -> list[dict]:
    t0 = time.time()
    rows = []
    while time.time() - t0 < timeout:
        r = scalelab("sweep", "status", spec, "--format", "json")
        rows = json.loads(r.stdout)
        if all(x["state"] in want for x in rows):
            return rows
        time.sleep(2)
    pytest.fail(f"timed out waiting for {want}: {[(x['name'], x['state']) for x in rows]}")


def test_job_array_four_runs_end_to_end(cluster, work, data):
    base = write_base(work / "base", data)
    spec = write_spec(
        work,
        {
            "name": "sl4",
            "base": str(base),
            "kind": "grid",
            "runs_dir": str(work / "runs"),
            "axes": {"optim.lr": [1e-3, 3e-3], "train.seed": [0, 1]},
            "executor": {"slurm": {"cpus_per_task": 1, "time": "00:20:00"}},
        },
    )
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    job = job_id(r.stdout)
    rows = wait_states(spec, {"done", "failed"}, timeout=600)
    assert [x["state"] for x in rows] == ["done"] * 4, rows
    for x in rows:
        d = work / "runs" / x["name"]
        s = summary(d)
        assert s["status"] == "done" and s["steps"] == 12 and s["extras"]["sweep"] == "sl4"
        assert "job " + job + "_" in (d / "train.log").read_text()
    outs = sorted((work / "runs" / ".sweep").glob(f"slurm-{job}_*.out"))
    assert len(outs) == 4
    again = scalelab("sweep", "launch", spec, "--executor", "slurm", cwd=work)
    assert again.returncode == 0 and "nothing to submit" in again.stdout and again.stdout.count(": done") == 4


def test_preempted_task_checkpoints_requeues_and_resumes(cluster, work, data):
    base = write_base(work / "base", data, steps=300, checkpoint_every_steps=20, log_every_steps=5)
    spec = write_spec(
        work,
        {
            "name": "slpre",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0],
            "runs_dir": str(work / "runs"),
            "executor": {"slurm": {"cpus_per_task": 1, "signal_secs": 60}},
        },
    )
    run_dir = work / "runs" / "s0"
    # Each checkpoint held open 0.5 s (sbatch exports the environment): a tiny step takes a few ms,
    # and the signal below must find the task still training, past its second checkpoint.
    r = scalelab(
        "sweep", "launch", spec, "--executor", "slurm", cwd=work, env={"SCALELAB_FAULT_CHECKPOINT_DELAY_S": "0.5"}
    )
    assert r.returncode == 0, r.stdout + r.stderr
    task = job_id(r.stdout) + "_0"
    t0 = time.time()

    def second():
        return [p for p in (run_dir / "checkpoints").glob("step_*/COMPLETE") if int(p.parent.name[5:]) >= 40]

    while not second():  # any checkpoint from the second on: older ones are pruned as training goes on
        assert time.time() - t0 < 300, "task never reached its second checkpoint"
        time.sleep(0.2)
    # What Slurm does before preemption / the time limit: SIGUSR1 to the batch shell.
    subprocess.run(["scancel", "--signal=USR1", "--batch", task], check=True)
    log = run_dir / "train.log"
    t0 = time.time()
    while "requeueing" not in log.read_text() and "scontrol requeue" not in log.read_text():
        if "received SIGUSR1" in log.read_text() and "=== trainer exit code 3" in log.read_text():
            break
        assert time.time() - t0 < 120, log.read_text()[-2000:]
        time.sleep(0.5)
    # Slurm holds a requeued job for a while (BeginTime); let it start now.
    t0 = time.time()
    while time.time() - t0 < 60:
        show = subprocess.run(["scontrol", "show", "job", task], capture_output=True, text=True).stdout
        if "JobState=PENDING" in show:
            # Not in the same second as the requeue: slurmd rejects a credential issued in the
            # second its predecessor was revoked ("Job credential revoked").
            time.sleep(3)
            subprocess.run(["scontrol", "update", f"JobId={task}", "StartTime=now"], capture_output=True)
            break
        time.sleep(0.5)
    wait_states(spec, {"done", "failed"}, timeout=600)
    s = summary(run_dir)
    assert s["status"] == "done" and s["steps"] == 300
    text = log.read_text()
    assert "received SIGUSR1: checkpoint step_" in text and "=== trainer exit code 3" in text
    stopped_at = int(re.search(r"received SIGUSR1: checkpoint step_(\d+)", text).group(1))
    assert f"resumed from checkpoint step_{stopped_at} " in text  # the signal's own checkpoint: nothing lost
    assert text.count("=== ") >= 3  # two attempt headers and the first attempt's exit line
    assert metrics_steps(run_dir) == list(range(5, 301, 5))
    show = subprocess.run(["scontrol", "show", "job", task], capture_output=True, text=True).stdout
    if show:  # still known to slurmctld (MinJobAge)
        assert "Restarts=1" in show


def test_unprepared_data_is_prepared_by_its_own_job_before_the_array(cluster, work):
    import yaml

    data_dir = work / "data-tv300"
    base = write_base(work / "base", data_dir)
    cfg = yaml.safe_load(base.read_text())
    cfg["data"].update({"name": "tv300", "tokenizer": {"kind": "bpe", "vocab_size": 300}})
    base.write_text(yaml.safe_dump(cfg))
    spec = write_spec(
        work,
        {
            "name": "sldata",
            "base": str(base),
            "kind": "grid",
            "runs_dir": str(work / "runs"),
            "axes": {"optim.lr": [1e-3, 3e-3]},
            "executor": {"slurm": {"cpus_per_task": 1, "time": "00:20:00"}},
        },
    )
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    data_job = re.search(r"submitted data job (\d+)", r.stdout).group(1)
    assert f"and data job(s) {data_job})" in r.stdout and "after node check" in r.stdout
    rows = wait_states(spec, {"done", "failed"}, timeout=600)
    assert [x["state"] for x in rows] == ["done"] * 2, rows
    assert (data_dir / "meta.json").is_file()
    out = (work / "runs" / ".sweep" / f"slurm-data-tv300-{data_job}.out").read_text()
    assert "data 'tv300': built" in out
    for x in rows:
        log = (work / "runs" / x["name"] / "train.log").read_text()
        assert "reusing prepared data" in log and "building" not in log


def _python_first_on_path(folder, target: str, marker, pythonpath=None) -> str:
    """A `python` that records each call in `marker` and runs `target`; returns the setup line that
    puts it first on PATH (as activating a venv or loading a module does)."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "python"
    exe.write_text(f'#!/bin/sh\necho "$@" >> {marker}\nexec {target} "$@"\n')
    exe.chmod(0o755)
    return f"export PATH={folder}:$PATH" + (f" PYTHONPATH={pythonpath}" if pythonpath else "")


def test_the_jobs_run_the_python_their_setup_provides_after_a_node_check(cluster, work, data):
    import sys

    base = write_base(work / "base", data)
    marker = work / "calls.txt"
    setup = _python_first_on_path(work / "venv-bin", sys.executable, marker)
    spec = write_spec(
        work,
        {
            "name": "slpy",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0],
            "runs_dir": str(work / "runs"),
            "executor": {"slurm": {"cpus_per_task": 1, "time": "00:20:00", "setup": [setup]}},
        },
    )
    dry = scalelab("sweep", "launch", spec, "--executor", "slurm", "--dry-run", cwd=work)
    assert (
        "exec python -m launch.sweep.node_check --gpus 0" in dry.stdout
        and "exec python -m launch.run.worker" in dry.stdout
    )
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "submitted node check" in r.stdout
    rows = wait_states(spec, {"done", "failed"}, timeout=600)
    assert [x["state"] for x in rows] == ["done"], rows
    calls = marker.read_text().splitlines()
    assert any("launch.sweep.node_check" in c for c in calls) and any("launch.run.worker" in c for c in calls)
    check = sorted((work / "runs" / ".sweep").glob("slurm-check-*.out"))
    assert check and "node check: ok: torch" in check[-1].read_text()


def test_a_failed_node_check_stops_the_array_with_its_reason(cluster, tmp_path, data):
    from tests.helpers import REPO

    work = tmp_path
    base = write_base(work / "base", data)
    setup = _python_first_on_path(work / "bad-bin", "/usr/bin/python3", work / "calls.txt", REPO)  # no torch there
    spec = write_spec(
        work,
        {
            "name": "slbad",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0],
            "runs_dir": str(work / "runs"),
            "executor": {"slurm": {"cpus_per_task": 1, "time": "00:10:00", "setup": [setup]}},
        },
    )
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    t0 = time.time()
    while time.time() - t0 < 300:
        st = scalelab("sweep", "status", spec, cwd=work)
        if "the last node check failed" in st.stdout:
            break
        time.sleep(2)
    assert "the last node check failed, so its arrays did not start" in st.stdout, st.stdout
    assert "torch does not import with /usr/bin/python3" in st.stdout
    t0 = time.time()  # Slurm drops the array whose dependency can never be met (--kill-on-invalid-dep)
    while (
        time.time() - t0 < 120
        and subprocess.run(["squeue", "-h", "-n", "slbad"], capture_output=True, text=True).stdout.strip()
    ):
        time.sleep(2)
    assert not subprocess.run(["squeue", "-h", "-n", "slbad"], capture_output=True, text=True).stdout.strip()
    assert not (work / "runs" / "s0" / "summary.json").exists()
