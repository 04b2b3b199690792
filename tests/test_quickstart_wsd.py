"""The main job's IsoFLOP study from WSD branches (`isoflop.schedule: wsd`): the sweep kind `wsd`
with budgets (which runs, which token counts, exact compute), its generation from the IsoFLOP
spec and a `sweep plan` of it, the config key's validation, Approach 1's curves without a stable
run's peak-lr intermediates, and `sweep status --format json`'s compute fields."""
from __future__ import annotations

import copy
import json
import math

import pytest
from conftest import REPO, scalelab, write_base, write_run, write_spec

from launch.expand import expand
from launch.spec import parse_spec

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
    for model, runs in by_model.items():
        stable, branches = runs[0], runs[1:]
        assert stable.axes["role"] == "stable" and all(b.axes["role"] == "branch" for b in branches)
        # the stable run ends at the largest kept budget's tokens; each branch at a smaller budget's
        assert stable.axes["budget"] == max(r.axes["budget"] for r in runs)
        assert sorted(b.axes["budget"] for b in branches) == [c for c in BUDGETS["budgets"] if c < stable.axes["budget"]
                                                             and any(b.axes["budget"] == c for b in branches)]
        for r in runs:
            c, fpt = r.axes["budget"], r.flops_per_token
            # exactly as kind isoflop: D = C / FLOPs-per-token rounded up to whole steps of 256 tokens
            assert r.steps == math.ceil(c / fpt / 256) and r.tokens == r.steps * 256
            assert r.flops == pytest.approx(r.tokens * fpt) and c <= r.flops < c + 256 * fpt
            assert r.axes["compute"] == "trainer_flops" and r.axes.get("end_point", True)
        for b in branches:
            assert b.after == (stable.name, b.steps - b.cfg.schedule.decay_steps)
            assert b.cfg.schedule.decay_steps == max(1, round(0.2 * b.steps)) and b.shared_flops == pytest.approx(b.after[1] * 256 * b.flops_per_token)
        assert stable.cfg.train.checkpoint_at_steps == sorted(b.after[1] for b in branches)
    # every budget has its runs (approach 2 groups them by the `budget` axis: points at equal compute)
    assert {r.axes["budget"] for r in p.runs} == set(BUDGETS["budgets"])
    assert len(p.runs) == 9


def test_budgets_window_and_min_steps_skip_pairs_with_a_note(base):
    p = expand(spec_of(base, {**BUDGETS, "tokens_per_param": [0.1, 0.5]}))
    cosine = expand(parse_spec({"name": "c", "base": str(base), "set": SET, "kind": "isoflop",
                                "isoflop": {"models": BUDGETS["models"], "budgets": BUDGETS["budgets"], "min_steps": 4,
                                            "tokens_per_param": [0.1, 0.5]}}))
    # the same (budget, model) pairs and token counts as the cosine IsoFLOP sweep, at less compute
    assert sorted((r.axes["budget"], r.axes["model"], r.tokens) for r in p.runs) == \
        sorted((r.axes["budget"], r.axes["model"], r.tokens) for r in cosine.runs)
    assert sum(r.flops - r.shared_flops for r in p.runs) < sum(r.flops for r in cosine.runs)
    assert p.skipped and all("tokens per parameter outside wsd.tokens_per_param" in s for s in p.skipped)


def test_bad_budget_specs_exit_2(base, work):
    cases = [({**BUDGETS, "fractions": [0.5]}, "give exactly one of `fractions`"),
             ({k: v for k, v in BUDGETS.items() if k != "budgets"}, "give exactly one of `fractions`"),
             ({**BUDGETS, "tokens": 8192}, "`tokens` (D_max) comes from the largest budget"),
             ({**BUDGETS, "budgets": [2e9, -1]}, "wsd.budgets: must be distinct positive"),
             ({**BUDGETS, "budgets": [1e6]}, "wsd.budgets: no model gives a run at 1e6 FLOPs")]
    for i, (wsd, msg) in enumerate(cases):
        r = scalelab("sweep", "plan", write_spec(work, {"name": f"b{i}", "base": str(base), "set": SET, "kind": "wsd", "wsd": wsd}))
        assert r.returncode == 2 and msg in r.stderr, (wsd, r.stderr)


def test_quickstart_generates_a_wsd_spec_that_plans(work, capsys):
    from launch.quickstart import load_config
    from launch.quickstart_wsd import plan_run_schedule, write_wsd_spec

    cfg = load_config(str(REPO / "configs/quickstart-test.yaml"), ["isoflop.schedule=wsd", "isoflop.wsd.cooldown=0.25"])
    path = write_wsd_spec(REPO / cfg.isoflop.spec, cfg.isoflop.set, cfg.isoflop.wsd, work / "specs")
    assert path.name == "isoflop-tiny-wsd.yaml"
    # the test config's anchor is a cosine run outside the branch design: left out, and said
    assert "leaves out the IsoFLOP spec's 1 anchor run(s)" in capsys.readouterr().out and "anchors" not in path.read_text()
    r = scalelab("sweep", "plan", path, "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    # the test config's three budgets x three sizes: one stable run per size and two branches each
    assert len(rows) == 9 and sum(x["branch_from"] is None for x in rows) == 3
    table = scalelab("sweep", "plan", path)
    assert "9 runs (wsd)" in table.stdout and "with each stable prefix counted once" in table.stdout
    assert plan_run_schedule(cfg.isoflop.wsd)[:3] == ["schedule.name=wsd", "schedule.decay_fraction=0.25", "schedule.decay_shape=sqrt"]
    # budgets of its own: more points from branches
    cfg5 = load_config(str(REPO / "configs/quickstart-test.yaml"), ["isoflop.schedule=wsd", "isoflop.wsd.budgets=[1e10, 1.6e10, 2.5e10, 4e10, 6e10]"])
    more = json.loads(scalelab("sweep", "plan", write_wsd_spec(REPO / cfg5.isoflop.spec, cfg5.isoflop.set, cfg5.isoflop.wsd, work / "s5"),
                               "--format", "json").stdout)
    assert len(more) == 15


def test_schedule_key_is_validated(work):
    bad = scalelab("quickstart", REPO / "configs/quickstart-test.yaml", f"out={work / 'qs'}", "isoflop.schedule=linear")
    assert bad.returncode == 2 and "isoflop.schedule" in bad.stderr and "'cosine' or 'wsd'" in bad.stderr
    law = scalelab("quickstart", REPO / "configs/quickstart-test.yaml", f"out={work / 'qs'}", "isoflop.schedule=wsd", "hparams_law=true")
    assert law.returncode == 2 and "isoflop.schedule: wsd" in law.stderr and "hparams_law: false" in law.stderr
    cool = scalelab("quickstart", REPO / "configs/quickstart-test.yaml", f"out={work / 'qs'}", "isoflop.wsd.cooldown=1.5")
    assert cool.returncode == 2 and "isoflop.wsd.cooldown" in cool.stderr
    assert not (work / "qs").exists()  # nothing ran


def test_read_curves_uses_only_the_ends_of_wsd_runs_and_branches(work):
    from scaling.inputs import read_curves

    def run(name, schedule, init_from=None, n=10):
        recs = [{"step": i + 1, "tokens": 100 * (i + 1), "loss": 5.0 - 0.1 * i} for i in range(n)]
        cfg = {"schedule": {"name": schedule}, "train": {"init_from": init_from}}
        s = {"status": "done", "steps": n, "tokens": 100 * n, "params": 1000, "non_embedding_params": 800, "final_loss": 4.0}
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


def test_sweep_status_json_carries_the_compute(base, work):
    path = write_spec(work, {"name": "st", "base": str(base), "set": SET, "kind": "wsd", "runs_dir": str(work / "runs"),
                             "wsd": {"models": ["n50k"], "tokens": 8192, "fractions": [0.25, 0.5, 1.0], "warmup_steps": 2}})
    rows = json.loads(scalelab("sweep", "status", path, "--format", "json").stdout)
    assert [x["branch_of"] for x in rows] == [None, "n50k-stable", "n50k-stable"] and [x["branch_step"] for x in rows] == [None, 6, 13]
    for x in rows:
        assert x["computed_flops"] == pytest.approx(x["flops"] - x["shared_flops"])
    # summed: the study's compute with the stable prefix counted once, as the table's line says
    table = scalelab("sweep", "status", path).stdout
    total, separate = sum(x["computed_flops"] for x in rows), sum(x["flops"] for x in rows)
    assert f"compute: {total:.3g} FLOPs with each stable prefix counted once, {separate:.3g} as separate runs" in table
    csv = scalelab("sweep", "status", path, "--format", "csv").stdout
    assert csv.splitlines()[0].endswith("flops,shared_flops,computed_flops,branch_of,branch_step")
