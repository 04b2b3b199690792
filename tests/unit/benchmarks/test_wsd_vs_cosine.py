"""benchmarks/wsd_vs_cosine.py: its two sweeps plan the same (N, D) points (a wsd study and separate
cosine runs), and its comparison pairs runs by (model, tokens) and counts each stable prefix once."""

from __future__ import annotations

import argparse

import pytest
import yaml

from launch.sweep.expand import plan
from tests.helpers import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/wsd_vs_cosine.py")


def test_both_sweeps_plan_the_same_points(bench, tmp_path):
    args = argparse.Namespace(
        models="n25k,n50k", steps=64, fractions="0.25,0.5,1", cooldown=0.25, lr=0.01, out=str(tmp_path)
    )
    plans = {}
    for name, spec in bench.specs(args).items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        plans[name] = plan(tmp_path / f"{name}.yaml")
    points = {name: sorted((r.axes["model"], r.tokens) for r in p.runs) for name, p in plans.items()}
    assert points["wsd"] == points["cosine"] and len(points["wsd"]) == 6
    assert {r.cfg.schedule.name for r in plans["cosine"].runs} == {"cosine"} and {
        r.cfg.optim.lr for r in plans["wsd"].runs
    } == {0.01}
    assert all(
        r.cfg.schedule.min_lr_ratio == 0 and r.cfg.schedule.warmup_steps == 4 for p in plans.values() for r in p.runs
    )


def test_compare_pairs_points_and_counts_the_stable_prefix_once(bench):
    wsd = [
        {
            "run": "n50k-stable",
            "model": "n50k",
            "params": 100,
            "tokens": 4096,
            "final_val_loss": 4.0,
            "flops": 40.0,
            "axis.role": "stable",
        },
        {
            "run": "n50k-d1.02k",
            "model": "n50k",
            "params": 100,
            "tokens": 1024,
            "final_val_loss": 4.5,
            "flops": 10.0,
            "shared_flops": 8.0,
            "computed_flops": 2.0,
            "axis.role": "branch",
        },
    ]
    cos = [
        {"run": "n50k-d4.1k", "model": "n50k", "tokens": 4096, "final_val_loss": 4.04, "flops": 40.0},
        {"run": "n50k-d1.02k", "model": "n50k", "tokens": 1024, "final_val_loss": 4.5, "flops": 10.0},
    ]
    res = bench.compare(wsd, cos)
    assert [(p["D"], p["cosine_run"]) for p in res["points"]] == [(1024, "n50k-d1.02k"), (4096, "n50k-d4.1k")]
    assert res["points"][1]["rel_diff"] == pytest.approx(4.0 / 4.04 - 1)
    assert (
        res["wsd_flops_shared_once"] == 42.0
        and res["cosine_flops"] == 50.0
        and res["compute_ratio"] == pytest.approx(0.84)
    )
