"""Run registry and status over synthetic run directories: good, unfinished and broken ones
(half-written summary, torn metrics line, unreadable config, empty folder), the `runs` CLI, and
`sweep status` speed over 1,000 run dirs."""

from __future__ import annotations

import json
import time
from pathlib import Path

from launch.sweep.status import counts, run_status
from rundir.read import load_runs
from tests.helpers import scalelab, write_base, write_spec
from tests.unit.launch.test_runs_list import fake_run, runs  # noqa: F401 (shared with the unit tests)


def test_runs_cli_list_show_export(runs, work):
    r = scalelab("runs", "list", runs, "--format", "csv")
    assert r.returncode == 0, r.stderr
    header = r.stdout.splitlines()[0].split(",")
    assert "run" in header and "status" in header and "axis.optim.lr" in header
    assert "half-written" in r.stderr and "bad-config" in r.stderr
    r = scalelab("runs", "list", runs, "--format", "json", "--status", "done")
    rows = json.loads(r.stdout)
    assert sorted(x["run"] for x in rows) == ["n50k-lr1e-3", "n50k-lr3e-3"]
    r = scalelab("runs", "list", runs)
    assert r.returncode == 0 and "6 runs under" in r.stdout and "2 unreadable" in r.stdout
    r = scalelab("runs", "show", runs / "failed-run")
    assert r.returncode == 0 and "non-finite" in r.stdout and "last metrics" in r.stdout
    out = work / "all.csv"
    r = scalelab("runs", "export", runs, "-o", out)
    assert r.returncode == 0 and out.read_text().count("\n") == 7
    assert scalelab("runs", "list", work / "missing").returncode == 2


def test_status_over_1000_run_dirs_under_2s(work):
    base = write_base(work / "base", work / "data")
    spec = write_spec(
        work,
        {
            "name": "big",
            "base": str(base),
            "kind": "grid",
            "runs_dir": str(work / "big"),
            "axes": {"train.seed": list(range(100)), "optim.lr": [1e-3 * (i + 1) for i in range(10)]},
        },
    )
    from launch.sweep.expand import plan

    p = plan(spec)
    assert len(p.runs) == 1000
    kinds = ["done", "failed", None, "preempted", "running", "pending"]
    for i, r in enumerate(p.runs):
        k = kinds[i % len(kinds)]
        if k == "pending":
            continue
        fake_run(
            Path(r.run_dir),
            r.name,
            k if k in ("done", "failed", "preempted") else None,
            ckpt=k is None,
            steps=r.steps,
            run_id=r.id,
        )
    t0 = time.perf_counter()
    res = scalelab("sweep", "status", spec, "--format", "json")
    elapsed = time.perf_counter() - t0
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert len(rows) == 1000
    c = {}
    for row in rows:
        c[row["state"]] = c.get(row["state"], 0) + 1
    assert c == {"done": 167, "failed": 167, "partial": 167, "preempted": 167, "pending": 332}
    assert elapsed < 8.0, (
        elapsed
    )  # whole CLI: interpreter start + planning 1,000 runs + scan, on a shared noisy machine
    from launch.executors.slurm import queued_jobs
    from launch.sweep.status import sweep_status

    t0 = time.perf_counter()
    sts = sweep_status(p, queued_jobs(p.root))
    scan = time.perf_counter() - t0
    assert scan < 2.0, scan
    assert counts(sts)["failed"] == 167


def test_epochs_and_unique_tokens_columns(work):
    root = work / "runs" / "ep"
    fake_run(root / "done", "done", "done")
    summ = json.loads((root / "done" / "summary.json").read_text())
    summ.update({"epochs": 2.5, "unique_tokens": 1024, "epochs/books": 3.0, "tokens/books": 1536, "weight/books": 0.6})
    (root / "done" / "summary.json").write_text(json.dumps(summ))
    fake_run(root / "live", "live", None, steps=4)  # still training: epochs from its last metrics record
    with open(root / "live" / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 6, "tokens": 1536, "loss": 5.4, "epoch": 1.5}) + "\n")
    df, _ = load_runs(root)
    by = df.set_index("run")
    assert by.loc["done", "epochs"] == 2.5 and by.loc["done", "unique_tokens"] == 1024
    assert by.loc["done", "epochs/books"] == 3.0 and by.loc["done", "tokens/books"] == 1536
    assert by.loc["live", "epochs"] == 1.5
    r = scalelab("runs", "list", root)
    header = r.stdout.splitlines()[0].split()
    assert "epochs" in header and "2.5" in r.stdout and "1.5" in r.stdout
    assert run_status(root / "live").epochs == 1.5
