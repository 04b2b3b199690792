"""Sweep kind `wsd`: per model one stable run and cooldown branches from its checkpoints. Plans and
their errors (exit 2 naming the key); a local launch that starts each branch at its checkpoint,
whose first losses are the stable run's, that a rerun leaves alone, and whose status counts the
shared prefix once."""

from __future__ import annotations

import copy

import pytest

from launch.sweep.expand import expand, plan
from launch.sweep.spec import parse_spec
from rundir.schedules import lr_at as contract_lr
from tests.helpers import REPO as ROOT
from tests.helpers import write_base, write_run

SET = {"model.seq_len": 64}  # presets bring their own seq_len; 64 x 4 sequences = 256 tokens per step


WSD = {"models": ["n50k"], "tokens": 8192, "fractions": [0.25, 0.5, 1.0], "cooldown": 0.2, "warmup_steps": 2}


@pytest.fixture()
def base(work):
    return write_base(work / "base", work / "data")


def spec_of(base, wsd: dict, **kw):
    return parse_spec(copy.deepcopy({"name": "w", "base": str(base), "set": SET, "kind": "wsd", "wsd": wsd, **kw}))


def test_stable_run_and_branches(base):
    p = expand(spec_of(base, {**WSD, "models": ["n25k", "n50k"]}))
    assert [r.name for r in p.runs] == [
        "n25k-stable",
        "n25k-d2.05k",
        "n25k-d4.1k",
        "n50k-stable",
        "n50k-d2.05k",
        "n50k-d4.1k",
    ]
    stable, b8, b16 = p.runs[3:]
    # 8192 tokens / 256 per step = 32 steps; cooldown 20% of each run; branch point = steps - cooldown
    assert (stable.steps, stable.cfg.schedule.decay_steps, stable.cfg.train.checkpoint_at_steps) == (32, 6, [6, 13])
    assert stable.cfg.train.init_from is None and stable.after is None and stable.axes["role"] == "stable"
    for run, steps, cool, point in ((b8, 8, 2, 6), (b16, 16, 3, 13)):
        c = run.cfg
        assert (run.steps, run.tokens, c.schedule.decay_steps, c.train.checkpoint_at_steps) == (
            steps,
            steps * 256,
            cool,
            [],
        )
        assert c.train.init_from == str(p.root / "n50k-stable" / "checkpoints" / f"step_{point}")
        assert run.after == ("n50k-stable", point) and run.axes["branch_of"] == "n50k-stable"
        assert run.shared_flops == pytest.approx(point / steps * run.flops)
        assert (c.schedule.name, c.schedule.decay_shape, c.schedule.warmup_steps) == ("wsd", "sqrt", 2)
        # the branch's lr is the stable run's up to its branch point, then cools down to min_lr
        lrs = [contract_lr(k, steps, c.optim.lr, c.schedule) for k in range(steps)]
        assert lrs[:point] == [contract_lr(k, 32, c.optim.lr, stable.cfg.schedule) for k in range(point)]
        assert lrs[point - 1] == c.optim.lr and lrs[-1] == pytest.approx(c.optim.lr * c.schedule.min_lr_ratio)
    assert len({r.id for r in p.runs}) == len(p.runs)


def test_cooldown_steps_and_shapes(base):
    p = expand(
        spec_of(base, {**WSD, "cooldown": None, "cooldown_steps": 4, "decay_shape": "linear", "fractions": [0.5]})
    )
    stable, branch = p.runs
    assert stable.cfg.schedule.decay_steps == branch.cfg.schedule.decay_steps == 4
    assert stable.cfg.train.checkpoint_at_steps == [12] and branch.after == ("n50k-stable", 12)
    assert branch.cfg.schedule.decay_shape == "linear"


def test_adding_a_fraction_keeps_the_stable_run_the_same_run(base):
    one, two = (expand(spec_of(base, {**WSD, "fractions": f})) for f in ([0.25, 1.0], [0.25, 0.5, 1.0]))
    assert one.runs[0].cfg.train.checkpoint_at_steps == [6] and two.runs[0].cfg.train.checkpoint_at_steps == [6, 13]
    assert one.runs[0].id == two.runs[0].id and one.runs[1].id == two.runs[1].id  # checkpoint_at_steps is bookkeeping


def test_shipped_presets_plan():
    p = plan(ROOT / "configs" / "sweeps" / "wsd-tiny.yaml")
    assert len(p.runs) == 8 and sum(r.after is not None for r in p.runs) == 6
    assert sum(r.est_s for r in p.runs) < 5 * 60
    g = plan(ROOT / "configs" / "sweeps" / "wsd-gpu-example.yaml")
    assert [r.steps for r in g.runs[:4]] == [6400, 800, 1600, 3200]


def test_registry_marks_branches_and_skips_ends_that_are_not_points(work):
    from rundir.read import load_runs
    from scaling.data.inputs import read_run_dirs

    root = work / "reg"
    common = {"status": "done", "params": 1000, "non_embedding_params": 800, "final_loss": 4.0}
    write_run(root / "stable", summary={**common, "tokens": 4096, "flops": 8e9, "extras": {"axes": {"role": "stable"}}})
    write_run(
        root / "prefix", summary={**common, "tokens": 2048, "flops": 4e9, "extras": {"axes": {"end_point": False}}}
    )
    write_run(
        root / "branch",
        summary={
            **common,
            "tokens": 1024,
            "flops": 2e9,
            "final_loss": 4.5,
            "shared_tokens": 768,
            "shared_flops": 1.5e9,
            "init_from": {"run": str(root / "stable"), "step": 3},
        },
    )
    df, problems = load_runs(root)
    rows = {r["run"]: r for r in df.to_dict("records")}
    assert not problems and rows["branch"]["init_from"] == str(root / "stable") and rows["branch"]["branch_step"] == 3
    assert rows["branch"]["computed_flops"] == 0.5e9 and rows["stable"]["computed_flops"] == 8e9
    assert [rows[n]["end_point"] for n in ("stable", "prefix", "branch")] == [True, False, True]
    pts, warnings = read_run_dirs(root)
    assert sorted(pts["run"]) == [
        "branch",
        "stable",
    ] and "skipped 1 run(s) with an end that is not a study point" in " ".join(warnings)
    assert pts.set_index("run").loc["branch", "shared_flops"] == 1.5e9
