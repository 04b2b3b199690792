"""Run identity: in-loop evaluation, W&B and logging settings are bookkeeping (same run id, a
done run stays done), a grid run keeps its name when a one-value axis gains a second value, and
run directories named or hashed the old way are still found (never trained again). Fast: the
finished runs are written as the trainer leaves them, no training."""

from __future__ import annotations

import copy
import json

import yaml

from launch.sweep.expand import expand, plan
from launch.sweep.spec import parse_spec
from launch.sweep.status import run_status
from pretrain.config.loader import dump_config
from tests.helpers import scalelab, write_base, write_spec


def finish(run, run_dir=None, recorded_id=None):
    """A done run directory as the trainer leaves it (config.yaml, summary.json)."""
    d = run_dir or run.run_dir
    d.mkdir(parents=True, exist_ok=True)
    extras = {**run.cfg.extras, "run_id": recorded_id or run.id}
    cfg = run.cfg.model_copy(update={"extras": extras})
    (d / "config.yaml").write_text(dump_config(cfg))
    (d / "summary.json").write_text(
        json.dumps(
            {"status": "done", "steps": run.steps, "total_steps": run.steps, "final_loss": 5.0, "extras": extras}
        )
    )


def test_done_run_stays_done_when_eval_is_turned_on(work):
    base = write_base(work / "base", work / "data")
    spec = write_spec(
        work, {"name": "ev2", "base": str(base), "kind": "seeds", "seeds": [0], "runs_dir": str(work / "runs")}
    )
    [run] = plan(spec).runs
    finish(run)
    spec2 = write_spec(work / "v2", {**yaml.safe_load(spec.read_text()), "set": {"eval": {"suite": "tiny"}}})
    [run2] = plan(spec2).runs
    assert run_status(run2.run_dir, run2.name, run2.id).state == "done"
    r = scalelab("sweep", "status", spec2, "--format", "json")
    assert [s["state"] for s in json.loads(r.stdout)] == ["done"], r.stdout + r.stderr
    # A directory recorded under an older id rule (here: any other recorded id) whose config is
    # the planned run under today's rule is that run, not stale.
    finish(run, recorded_id="0123456789")
    assert run_status(run2.run_dir, run2.name, run2.id).state == "done"
    # ... but a directory holding another config is stale and left alone
    other = run.cfg.model_copy(update={"optim": run.cfg.optim.model_copy(update={"lr": 0.5})})
    (run.run_dir / "config.yaml").write_text(dump_config(other))
    assert run_status(run2.run_dir, run2.name, run2.id).state == "stale"


def test_finished_run_named_the_old_way_is_not_trained_again(work):
    """Runs named before every axis named a run (`lr1e-3` for a grid whose seed axis had one
    value) keep their directory when the seed axis gains a value: launch skips them as done."""
    base = write_base(work / "base", work / "data")
    spec = {
        "name": "old",
        "base": str(base),
        "kind": "grid",
        "runs_dir": str(work / "runs"),
        "axes": {"optim.lr": [1e-3, 3e-3], "train.seed": [0, 1]},
    }
    path = write_spec(work, spec)
    planned = {r.name: r for r in expand(parse_spec(copy.deepcopy(spec))).runs}
    for new, old in (("lr1e-3-s0", "lr1e-3"), ("lr3e-3-s0", "lr3e-3")):
        finish(planned[new], run_dir=work / "runs" / old)
    p = plan(path)
    assert [r.name for r in p.runs] == ["lr1e-3", "lr1e-3-s1", "lr3e-3", "lr3e-3-s1"]
    assert p.runs[0].run_dir == work / "runs" / "lr1e-3" and p.runs[0].raw["wandb"]["name"] == "lr1e-3"
    r = scalelab("sweep", "status", path, "--format", "json")
    assert [s["state"] for s in json.loads(r.stdout)] == ["done", "pending", "done", "pending"], r.stdout + r.stderr
    r = scalelab("sweep", "launch", path, "--only", "lr1e-3,lr3e-3", "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 done, 0 failed, 0 stopped, 2 skipped" in r.stdout
    assert sorted(d.name for d in (work / "runs").iterdir() if not d.name.startswith(".")) == ["lr1e-3", "lr3e-3"]
