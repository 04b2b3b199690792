"""The Slurm data job without a cluster: the scripts and the sbatch commands a launch generates.

A sweep whose data set is not prepared submits `scalelab data prepare` as its own job first and
makes the run array depend on it. `sbatch` here is a stand-in on PATH that records what it is
given and answers job ids like `sbatch --parsable`; nothing is run. The real cluster runs the
same launch end to end in test_slurm_sweep.py (skipped where Slurm is absent)."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import yaml

from tests.helpers import prepared_data, requires_corpus, scalelab, write_base, write_spec

FAKE_SBATCH = """#!/bin/bash
n=$(( $(cat "$SBATCH_LOG.count" 2>/dev/null || echo 100) + 1 ))
echo $n > "$SBATCH_LOG.count"
{ echo "=== sbatch $* -> $n"; cat "${@: -1}"; } >> "$SBATCH_LOG"
echo "$n;cluster"
"""


def fresh_spec(work: Path, name: str) -> tuple[Path, Path]:
    data_dir = work / "data-tv300"
    base = write_base(work / "base", data_dir, steps=4)
    cfg = yaml.safe_load(base.read_text())
    cfg["data"].update({"name": "tv300", "tokenizer": {"kind": "bpe", "vocab_size": 300}})
    base.write_text(yaml.safe_dump(cfg))
    spec = write_spec(
        work,
        {
            "name": name,
            "base": str(base),
            "kind": "grid",
            "runs_dir": str(work / "runs"),
            "axes": {"optim.lr": [1e-3, 3e-3]},
            "executor": {"slurm": {"partition": "cpu", "cpus_per_task": 4, "gpus_per_node": 1, "time": "01:00:00"}},
        },
    )
    return spec, data_dir


@requires_corpus
def test_dry_run_shows_the_data_job_and_the_dependency(work):
    spec, data_dir = fresh_spec(work, "sdry")
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", "--dry-run", cwd=work)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    data_part, rest = out.split("# node check", 1)
    check_part, array_part = rest.split("# manifest ", 1)
    assert "#SBATCH --gpus-per-node=1" in check_part and "-m launch.sweep.node_check --gpus 1" in check_part
    assert "#SBATCH --job-name=sdry-data-tv300" in data_part and "#SBATCH --cpus-per-task=4" in data_part
    assert "#SBATCH --partition=cpu" in data_part and "gpus" not in data_part  # the data job takes no GPU
    assert re.search(r"exec \S+ -m launch\.cli data prepare \S+/\.sweep/data-tv300-[0-9a-f]{10}\.yaml", data_part)
    assert (
        "#SBATCH --dependency=afterok:<node check>:<data job tv300>" in array_part
        and "--kill-on-invalid-dep=yes" in array_part
    )
    assert "#SBATCH --gpus-per-node=1" in array_part
    assert not data_dir.exists()  # a dry run prepares nothing


@requires_corpus
def test_launch_submits_the_data_job_first_and_the_array_after_it(work):
    spec, data_dir = fresh_spec(work, "sdep")
    bindir = work / "bin"
    bindir.mkdir()
    (bindir / "sbatch").write_text(FAKE_SBATCH)
    (bindir / "sbatch").chmod(stat.S_IRWXU)
    log = work / "sbatch.log"
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "SBATCH_LOG": str(log)}
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", cwd=work, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (
        "submitted node check 101" in r.stdout and "submitted data job 102 (scalelab data prepare: tv300)" in r.stdout
    )
    assert "submitted job array 103 (2 tasks, after node check 101 and data job(s) 102)" in r.stdout
    calls = re.findall(r"=== sbatch --parsable (\S+) -> (\d+)", log.read_text())
    assert [Path(p).name.startswith(("sdep-check-", "sdep-data-tv300-", "sdep-2")) for p, _ in calls] == [True] * 3
    assert [Path(p).name.split("-")[1] for p, _ in calls][:2] == ["check", "data"]
    text = log.read_text()
    assert "#SBATCH --dependency=afterok:101:102" in text
    config = re.search(r"data prepare (\S+\.yaml)", text).group(1)
    dcfg = yaml.safe_load(Path(config).read_text())
    assert dcfg["name"] == "tv300" and dcfg["out_dir"] == str(data_dir) and dcfg["tokenizer"]["vocab_size"] == 300
    jobs = [json.loads(ln) for ln in (work / "runs" / ".sweep" / "jobs.jsonl").read_text().splitlines()]
    assert jobs[0]["kind"] == "check" and jobs[1]["kind"] == "data"
    assert jobs[2]["depends_on"] == ["101", "102"] and jobs[2]["runs"] == ["lr1e-3", "lr3e-3"]


@requires_corpus
def test_prepared_data_needs_no_data_job(work):
    data = prepared_data()  # the shared tv512 set, already prepared
    base = write_base(work / "base", data, steps=4)
    spec = write_spec(
        work, {"name": "sready", "base": str(base), "kind": "seeds", "seeds": [0], "runs_dir": str(work / "runs")}
    )
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", "--dry-run", cwd=work)
    assert r.returncode == 0 and "data job" not in r.stdout, r.stdout
    assert "#SBATCH --dependency=afterok:<node check>\n" in r.stdout  # the node check only


@requires_corpus
def test_missing_corpus_fails_the_launch_before_submitting(work):
    spec, _ = fresh_spec(work, "sbad")
    r = scalelab(
        "sweep", "launch", spec, "--executor", "slurm", "--dry-run", "--set", "set.data.sources=[nope.txt]", cwd=work
    )
    assert r.returncode == 2 and "source 'nope.txt' not found" in r.stderr, r.stdout + r.stderr


@requires_corpus
def test_a_data_set_in_tasks_gets_a_data_job_that_drives_task_arrays(work):
    spec, _ = fresh_spec(work, "stasks")
    base = Path(yaml.safe_load(spec.read_text())["base"])
    cfg = yaml.safe_load(base.read_text())
    cfg["data"]["tasks"] = 4
    base.write_text(yaml.safe_dump(cfg))
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", "--dry-run", cwd=work)
    assert r.returncode == 0, r.stderr
    data_part = r.stdout.split("# node check", 1)[0]
    # the data job runs the driver; each pass's tasks are a job array with the runs' partition, time and CPUs
    assert re.search(
        r"data prepare \S+\.yaml --executor slurm --sbatch-arg=--partition=cpu --sbatch-arg=--time=01:00:00 "
        r"--sbatch-arg=--cpus-per-task=4",
        data_part,
    ), data_part
