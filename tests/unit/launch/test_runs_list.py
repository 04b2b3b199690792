"""Run registry and status over synthetic run directories: good, unfinished and broken ones
(half-written summary, torn metrics line, unreadable config, empty folder), the `runs` CLI, and
`sweep status` speed over 1,000 run dirs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from launch.run.locks import RunLock
from launch.sweep.status import run_status
from rundir.read import load_runs
from rundir.summary import RunSummary
from tests.helpers import write_run


def fake_run(
    d: Path, name: str, status: str | None, *, steps=10, axes=None, ckpt=False, total=10, torn=False, run_id=None
):
    extras = {"sweep": "fake", "run": name, "run_id": run_id or "abc" + name[-3:], "axes": axes or {}}
    cfg = {
        "name": name,
        "model": {"preset": "n50k", "d_model": 48, "n_layers": 2, "n_heads": 4, "seq_len": 64, "vocab_size": 512},
        "optim": {"lr": 3e-3},
        "train": {"global_batch_size": 4, "seed": 0},
        "extras": extras,
    }
    lines = "".join(
        json.dumps({"step": s, "tokens": s * 256, "loss": 6.0 - 0.1 * s}) + "\n" for s in range(2, steps + 1, 2)
    )
    summ = None
    if status:
        summ = RunSummary(
            status=status,
            steps=steps,
            total_steps=total,
            tokens=steps * 256,
            params=104688,
            non_embedding_params=55536,
            flops=steps * 256 * 5.5e5,
            batch_size=4,
            lr=3e-3,
            final_loss=6.0 - 0.1 * steps,
            final_val_loss=6.1 - 0.1 * steps,
            wall_s=3.0,
            extras=extras,
            error="non-finite loss (nan) at step 7" if status == "failed" else None,
        )
    write_run(
        d,
        config=cfg,
        metrics=lines + ('{"step": 12, "lo' if torn else ""),
        summary=summ,
        checkpoint=steps if ckpt else None,
    )


@pytest.fixture()
def runs(work):
    root = work / "runs" / "fake"
    fake_run(root / "n50k-lr1e-3", "n50k-lr1e-3", "done", axes={"model": "n50k", "optim.lr": 1e-3})
    fake_run(root / "n50k-lr3e-3", "n50k-lr3e-3", "done", axes={"model": "n50k", "optim.lr": 3e-3})
    fake_run(root / "failed-run", "failed-run", "failed", steps=6)
    fake_run(root / "partial-run", "partial-run", None, steps=4, ckpt=True, torn=True)
    fake_run(root / "preempted-run", "preempted-run", "preempted", steps=4, ckpt=True)
    bad = root / "half-written"
    fake_run(bad, "half-written", "done")
    (bad / "summary.json").write_text('{"status": "do')  # torn write (no atomic rename)
    badcfg = root / "bad-config"
    badcfg.mkdir()
    (badcfg / "config.yaml").write_text("model: [unclosed\n")
    (root / "empty-dir").mkdir()
    (root / "launched-only").mkdir()
    (root / "launched-only" / "launch.yaml").write_text(
        yaml.safe_dump({"name": "launched-only", "optim": {"lr": 1e-3}})
    )
    return root


def test_load_runs_good_and_broken(runs):
    df, problems = load_runs(runs.parent)
    by = df.set_index("run")
    assert set(by.index) == {
        "n50k-lr1e-3",
        "n50k-lr3e-3",
        "failed-run",
        "partial-run",
        "preempted-run",
        "launched-only",
    }
    assert by.loc["n50k-lr3e-3", "status"] == "done" and by.loc["n50k-lr3e-3", "axis.optim.lr"] == 3e-3
    assert by.loc["n50k-lr1e-3", "final_loss"] == pytest.approx(5.0) and by.loc["n50k-lr1e-3", "d_model"] == 48
    assert by.loc["failed-run", "status"] == "failed" and "non-finite" in by.loc["failed-run", "error"]
    assert by.loc["partial-run", "status"] == "partial" and by.loc["partial-run", "steps"] == 4  # torn line skipped
    assert by.loc["preempted-run", "status"] == "preempted"
    assert by.loc["launched-only", "status"] == "pending" and by.loc["launched-only", "lr"] == 1e-3
    reasons = {Path(p["path"]).name: p["problem"] for p in problems}
    assert "half-written" in reasons["half-written"] and "summary.json" in reasons["half-written"]
    assert "config.yaml unreadable" in reasons["bad-config"]
    assert "empty-dir" not in reasons  # not a run dir at all


def test_status_states_and_lock(runs):
    assert run_status(runs / "partial-run").state == "partial"
    assert run_status(runs / "nope").state == "pending"
    with RunLock(runs / "partial-run"):
        st = run_status(runs / "partial-run")
        assert st.state == "running" and st.step == 4 and st.loss == pytest.approx(5.6)
    assert run_status(runs / "partial-run").state == "partial"
    stale = run_status(runs / "n50k-lr1e-3", planned_id="different")
    assert stale.state == "stale" and "different" in stale.error
    from launch.run.worker import start_or_skip

    assert start_or_skip(runs / "n50k-lr1e-3", False, "different") == "stale"  # executors skip it, never clobber it
    assert (
        start_or_skip(runs / "n50k-lr1e-3", False) == "done" and start_or_skip(runs / "failed-run", False) == "failed"
    )
    assert start_or_skip(runs / "failed-run", True) == "run" and start_or_skip(runs / "partial-run", False) == "run"
