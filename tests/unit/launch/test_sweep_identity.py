"""Run identity: in-loop evaluation, W&B and logging settings are bookkeeping (same run id, a
done run stays done), a grid run keeps its name when a one-value axis gains a second value, and
run directories named or hashed the old way are still found (never trained again). Fast: the
finished runs are written as the trainer leaves them, no training."""

from __future__ import annotations

import copy

from launch.sweep.expand import expand, plan
from launch.sweep.spec import parse_spec
from pretrain.config.loader import dump_config
from tests.helpers import write_base, write_spec


def test_inloop_eval_wandb_and_logging_do_not_change_run_ids(work):
    base = write_base(work / "base", work / "data")
    spec = {
        "name": "ev",
        "base": str(base),
        "kind": "grid",
        "runs_dir": str(work / "runs"),
        "axes": {"optim.lr": [1e-3, 3e-3]},
    }
    before = expand(parse_spec(copy.deepcopy(spec)))
    spec["set"] = {
        "eval": {"suite": "tiny", "every_tokens": 1000, "limit": 10},
        "wandb.mode": "offline",
        "wandb.project": "other",
        "train.log_every_steps": 1,
        "train.eval_every_steps": 3,
        "train.checkpoint_every_steps": 2,
        "train.keep_checkpoints": 5,
    }
    after = expand(parse_spec(copy.deepcopy(spec)))
    assert [(r.name, r.id) for r in after.runs] == [(r.name, r.id) for r in before.runs]
    assert after.runs[0].cfg.eval is not None  # ... while the runs do evaluate in the loop
    # what a run computes still changes its id
    spec["set"] = {"optim.weight_decay": 0.05}
    assert all(a.id != b.id for a, b in zip(expand(parse_spec(spec)).runs, before.runs))


def test_grid_names_do_not_depend_on_other_axes_value_counts(work):
    base = write_base(work / "base", work / "data")
    spec = {
        "name": "g",
        "base": str(base),
        "kind": "grid",
        "runs_dir": str(work / "runs"),
        "axes": {"optim.lr": [1e-3, 3e-3], "train.seed": [0]},
    }
    one = {r.name: r.id for r in expand(parse_spec(copy.deepcopy(spec))).runs}
    assert list(one) == ["lr1e-3-s0", "lr3e-3-s0"]
    spec["axes"]["train.seed"] = [0, 1]
    two = {r.name: r.id for r in expand(parse_spec(copy.deepcopy(spec))).runs}
    assert list(two) == ["lr1e-3-s0", "lr1e-3-s1", "lr3e-3-s0", "lr3e-3-s1"]
    assert all(two[n] == i for n, i in one.items())


def test_only_directories_of_the_same_sweep_are_taken_over(work):
    base = write_base(work / "base", work / "data")
    spec = {"name": "mine", "base": str(base), "kind": "seeds", "seeds": [0], "runs_dir": str(work / "runs")}
    path = write_spec(work, spec)
    [run] = expand(parse_spec(copy.deepcopy(spec))).runs
    theirs = run.cfg.model_copy(update={"extras": {**run.cfg.extras, "sweep": "theirs"}})
    (work / "runs" / "other").mkdir(parents=True)
    (work / "runs" / "other" / "config.yaml").write_text(dump_config(theirs))
    [planned] = plan(path).runs
    assert planned.name == "s0" and planned.run_dir == work / "runs" / "s0"
