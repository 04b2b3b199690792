"""`scalelab sweep eval`: every finished run of a tiny sweep evaluated with a local task through
the local executor, unfinished runs left alone, a rerun skips what is evaluated, the Slurm
script (dry run) and a real Slurm array when a cluster is up, and a bad suite exits 2 before any model loads."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from evals import tasks as T
from tests.helpers import SHARED, prepared_data, scalelab, write_base, write_spec

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not T.data_root().exists(), reason="bundled eval data not found")]
TASK = ["--suite", "tiny", "--tasks", "tinyshakespeare_bpb", "--limit", "2", "--no-wandb", "--threads", "1"]


@pytest.fixture(scope="module")
def sweep():
    """A two-run sweep with one run finished (s0) and one never started (s1)."""
    SHARED.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="eval-", dir=SHARED))
    base = write_base(work / "base", prepared_data(), steps=4, checkpoint_every_steps=4)
    spec = write_spec(
        work,
        {
            "name": "ev",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0, 1],
            "runs_dir": str(work / "runs"),
            "executor": {"slurm": {"partition": "p", "gpus_per_node": 1}},
        },
    )
    r = scalelab("sweep", "launch", spec, "--only", "s0", "--no-progress", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    yield work, spec
    shutil.rmtree(work, ignore_errors=True)


def test_sweep_eval_local_idempotent_and_slurm_script(sweep):
    work, spec = sweep
    bad = scalelab("sweep", "eval", spec, "--suite", "no_such_suite", cwd=work)
    assert bad.returncode == 2 and "no_such_suite" in bad.stderr and not (work / "runs" / "s0" / "evals").exists()

    dry = scalelab("sweep", "eval", spec, *TASK, "--executor", "slurm", "--dry-run", cwd=work)
    assert dry.returncode == 0, dry.stderr
    for needle in (
        "#SBATCH --array=0-0",
        "#SBATCH --partition=p",
        "#SBATCH --gpus-per-node=1",
        "-m launch.commands.sweep_eval --manifest",
        "--index $SLURM_ARRAY_TASK_ID",
        "--tasks tinyshakespeare_bpb",
    ):
        assert needle in dry.stdout, needle
    assert f"0: {work / 'runs' / 's0'}" in dry.stdout

    # a failing task: exit 1, and the run is not counted as evaluated (the next eval retries it)
    r = scalelab("sweep", "eval", spec, *TASK, cwd=work, env={"SCALELAB_EVAL_FAULT": "task:tinyshakespeare_bpb"})
    assert r.returncode == 1 and "0 evaluated, 1 failed" in r.stdout, r.stdout + r.stderr

    r = scalelab("sweep", "eval", spec, *TASK, cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "skipped s1: pending, not finished" in r.stdout and "1 to evaluate with tiny" in r.stdout
    assert "1 evaluated, 0 failed" in r.stdout
    doc_path = work / "runs" / "s0" / "evals" / "4.json"
    doc = json.loads(doc_path.read_text())
    assert doc["suites"] == ["tiny"] and doc["failed"] == []
    bpb = [x for x in doc["results"] if x["task"] == "tinyshakespeare_bpb" and x["metric"] == "bits_per_byte"]
    assert len(bpb) == 1 and 0 < bpb[0]["value"] < 10 and bpb[0]["n"] == 2
    assert not (work / "runs" / "s1" / "evals").exists()

    mtime = doc_path.stat().st_mtime
    again = scalelab("sweep", "eval", spec, *TASK, cwd=work)
    assert again.returncode == 0 and "0 to evaluate with tiny, 1 already evaluated, 1 not finished" in again.stdout
    assert doc_path.stat().st_mtime == mtime


def test_sweep_eval_on_slurm(sweep):
    if shutil.which("sbatch") is None:
        pytest.skip("Slurm client (sbatch) not installed: run .ci/slurm_up.sh")
    r = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], capture_output=True, text=True)
    if r.returncode != 0 or not any(s.rstrip("*") in ("idle", "mix", "alloc") for s in r.stdout.split()):
        pytest.skip(f"no usable Slurm node (sinfo: {r.stdout.strip() or r.stderr.strip()}): run .ci/slurm_up.sh")
    work, spec = sweep
    task = [
        "--suite",
        "tiny",
        "--tasks",
        "blimp_anaphor_number_agreement",
        "--limit",
        "2",
        "--no-wandb",
        "--threads",
        "1",
    ]
    slurm = [
        "--executor",
        "slurm",
        "--set",
        "executor.slurm.partition=null",
        "--set",
        "executor.slurm.gpus_per_node=0",
        "--set",
        "executor.slurm.cpus_per_task=1",
    ]
    r = scalelab("sweep", "eval", spec, *task, *slurm, cwd=work)
    assert r.returncode == 0 and "1 to evaluate with tiny" in r.stdout, r.stdout + r.stderr
    job = re.search(r"submitted eval job array (\d+)", r.stdout).group(1)
    # while it is queued or running, a second eval submits nothing for that run
    again = scalelab("sweep", "eval", spec, *task, *slurm, cwd=work)
    assert again.returncode == 0 and ("already queued" in again.stdout or "1 already evaluated" in again.stdout), (
        again.stdout
    )
    t0 = time.time()
    while subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True).stdout.strip():
        assert time.time() - t0 < 400, "eval job did not finish"
        time.sleep(2)
    doc = json.loads((work / "runs" / "s0" / "evals" / "4.json").read_text())
    assert any(x["task"] == "blimp_anaphor_number_agreement" and x["n"] == 2 for x in doc["results"]), doc
    done = scalelab("sweep", "eval", spec, *task, *slurm, cwd=work)
    assert "0 to evaluate with tiny, 1 already evaluated" in done.stdout, done.stdout
