"""The main job's IsoFLOP study from WSD branches (`isoflop.schedule: wsd`): the sweep kind `wsd`
with budgets (which runs, which token counts, exact compute), its generation from the IsoFLOP
spec and a `sweep plan` of it, the config key's validation, Approach 1's curves without a stable
run's peak-lr intermediates, and `sweep status --format json`'s compute fields."""

from __future__ import annotations

import copy
import math

import pytest

from launch.sweep.expand import expand
from launch.sweep.spec import parse_spec
from tests.helpers import write_base, write_run

SET = {"model.seq_len": 64}  # 64 x 4 sequences = 256 tokens per step


BUDGETS = {"models": ["n25k", "n50k", "n100k"], "budgets": [2e9, 5e9, 1.2e10], "cooldown": 0.2, "min_steps": 4}


@pytest.fixture()
def base(work):
    return write_base(work / "base", work / "data")


def spec_of(base, wsd: dict, **kw):
    return parse_spec(copy.deepcopy({"name": "w", "base": str(base), "set": SET, "kind": "wsd", "wsd": wsd, **kw}))


def test_budgets_give_one_stable_run_per_size_and_a_branch_per_smaller_budget(base):
    p = expand(spec_of(base, BUDGETS))
    by_model: dict[str, list] = {}
    for r in p.runs:
        by_model.setdefault(r.axes["model"], []).append(r)
    for _model, runs in by_model.items():
        stable, branches = runs[0], runs[1:]
        assert stable.axes["role"] == "stable" and all(b.axes["role"] == "branch" for b in branches)
        # the stable run ends at the largest kept budget's tokens; each branch at a smaller budget's
        assert stable.axes["budget"] == max(r.axes["budget"] for r in runs)
        assert sorted(b.axes["budget"] for b in branches) == [
            c for c in BUDGETS["budgets"] if c < stable.axes["budget"] and any(b.axes["budget"] == c for b in branches)
        ]
        for r in runs:
            c, fpt = r.axes["budget"], r.flops_per_token
            # exactly as kind isoflop: D = C / FLOPs-per-token rounded up to whole steps of 256 tokens
            assert r.steps == math.ceil(c / fpt / 256) and r.tokens == r.steps * 256
            assert r.flops == pytest.approx(r.tokens * fpt) and c <= r.flops < c + 256 * fpt
            assert r.axes["compute"] == "trainer_flops" and r.axes.get("end_point", True)
        for b in branches:
            assert b.after == (stable.name, b.steps - b.cfg.schedule.decay_steps)
            assert b.cfg.schedule.decay_steps == max(1, round(0.2 * b.steps)) and b.shared_flops == pytest.approx(
                b.after[1] * 256 * b.flops_per_token
            )
        assert stable.cfg.train.checkpoint_at_steps == sorted(b.after[1] for b in branches)
    # every budget has its runs (approach 2 groups them by the `budget` axis: points at equal compute)
    assert {r.axes["budget"] for r in p.runs} == set(BUDGETS["budgets"])
    assert len(p.runs) == 9


def test_budgets_window_and_min_steps_skip_pairs_with_a_note(base):
    p = expand(spec_of(base, {**BUDGETS, "tokens_per_param": [0.1, 0.5]}))
    cosine = expand(
        parse_spec(
            {
                "name": "c",
                "base": str(base),
                "set": SET,
                "kind": "isoflop",
                "isoflop": {
                    "models": BUDGETS["models"],
                    "budgets": BUDGETS["budgets"],
                    "min_steps": 4,
                    "tokens_per_param": [0.1, 0.5],
                },
            }
        )
    )
    # the same (budget, model) pairs and token counts as the cosine IsoFLOP sweep, at less compute
    assert sorted((r.axes["budget"], r.axes["model"], r.tokens) for r in p.runs) == sorted(
        (r.axes["budget"], r.axes["model"], r.tokens) for r in cosine.runs
    )
    assert sum(r.flops - r.shared_flops for r in p.runs) < sum(r.flops for r in cosine.runs)
    assert p.skipped and all("tokens per parameter outside wsd.tokens_per_param" in s for s in p.skipped)


def test_read_curves_uses_only_the_ends_of_wsd_runs_and_branches(work):
    from scaling.data.inputs import read_curves

    def run(name, schedule, init_from=None, n=10):
        recs = [{"step": i + 1, "tokens": 100 * (i + 1), "loss": 5.0 - 0.1 * i} for i in range(n)]
        cfg = {"schedule": {"name": schedule}, "train": {"init_from": init_from}}
        s = {
            "status": "done",
            "steps": n,
            "tokens": 100 * n,
            "params": 1000,
            "non_embedding_params": 800,
            "final_loss": 4.0,
        }
        if init_from:
            s["init_from"] = {"run": str(work / "r" / "a-stable"), "step": 5}
        write_run(work / "r" / name, config=cfg, metrics=recs, summary=s)

    run("a-stable", "wsd")
    run("a-d500", "wsd", init_from=str(work / "r" / "a-stable" / "checkpoints" / "step_5"))
    run("b-cosine", "cosine")
    df, warnings = read_curves(work / "r")
    counts = df.groupby("run").size().to_dict()
    assert counts == {"a-stable": 1, "a-d500": 1, "b-cosine": 9}  # cosine: the curve less its first 10%
    assert df[df.run == "a-stable"].iloc[0][["D", "loss"]].tolist() == [1000, 4.0]
    assert any("2 run(s) with a WSD or constant lr" in w and "end point only" in w for w in warnings)
