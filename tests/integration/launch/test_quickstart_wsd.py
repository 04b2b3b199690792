"""The main job's IsoFLOP study from WSD branches (`isoflop.schedule: wsd`): the sweep kind `wsd`
with budgets (which runs, which token counts, exact compute), its generation from the IsoFLOP
spec and a `sweep plan` of it, the config key's validation, Approach 1's curves without a stable
run's peak-lr intermediates, and `sweep status --format json`'s compute fields."""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO, requires_corpus, scalelab, write_spec
from tests.unit.launch.test_quickstart_wsd import BUDGETS, SET, base  # noqa: F401 (shared with the unit tests)


def test_bad_budget_specs_exit_2(base, work):
    cases = [
        ({**BUDGETS, "fractions": [0.5]}, "give exactly one of `fractions`"),
        ({k: v for k, v in BUDGETS.items() if k != "budgets"}, "give exactly one of `fractions`"),
        ({**BUDGETS, "tokens": 8192}, "`tokens` (D_max) comes from the largest budget"),
        ({**BUDGETS, "budgets": [2e9, -1]}, "wsd.budgets: must be distinct positive"),
        ({**BUDGETS, "budgets": [1e6]}, "wsd.budgets: no model gives a run at 1e6 FLOPs"),
    ]
    for i, (wsd, msg) in enumerate(cases):
        r = scalelab(
            "sweep",
            "plan",
            write_spec(work, {"name": f"b{i}", "base": str(base), "set": SET, "kind": "wsd", "wsd": wsd}),
        )
        assert r.returncode == 2 and msg in r.stderr, (wsd, r.stderr)


@requires_corpus
def test_quickstart_generates_a_wsd_spec_that_plans(work, capsys):
    from launch.quickstart.job import load_config
    from launch.quickstart.wsd import plan_run_schedule, write_wsd_spec

    cfg = load_config(str(REPO / "configs/quickstart-test.yaml"), ["isoflop.schedule=wsd", "isoflop.wsd.cooldown=0.25"])
    path = write_wsd_spec(REPO / cfg.isoflop.spec, cfg.isoflop.set, cfg.isoflop.wsd, work / "specs")
    assert path.name == "isoflop-tiny-wsd.yaml"
    # the test config's anchor is a cosine run outside the branch design: left out, and said
    assert (
        "leaves out the IsoFLOP spec's 1 anchor run(s)" in capsys.readouterr().out and "anchors" not in path.read_text()
    )
    r = scalelab("sweep", "plan", path, "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    # the test config's three budgets x three sizes: one stable run per size and two branches each
    assert len(rows) == 9 and sum(x["branch_from"] is None for x in rows) == 3
    table = scalelab("sweep", "plan", path)
    assert "9 runs (wsd)" in table.stdout and "with each stable prefix counted once" in table.stdout
    assert plan_run_schedule(cfg.isoflop.wsd)[:3] == [
        "schedule.name=wsd",
        "schedule.decay_fraction=0.25",
        "schedule.decay_shape=sqrt",
    ]
    # budgets of its own: more points from branches
    cfg5 = load_config(
        str(REPO / "configs/quickstart-test.yaml"),
        ["isoflop.schedule=wsd", "isoflop.wsd.budgets=[1e10, 1.6e10, 2.5e10, 4e10, 6e10]"],
    )
    more = json.loads(
        scalelab(
            "sweep",
            "plan",
            write_wsd_spec(REPO / cfg5.isoflop.spec, cfg5.isoflop.set, cfg5.isoflop.wsd, work / "s5"),
            "--format",
            "json",
        ).stdout
    )
    assert len(more) == 15


def test_schedule_key_is_validated(work):
    bad = scalelab("quickstart", REPO / "configs/quickstart-test.yaml", f"out={work / 'qs'}", "isoflop.schedule=linear")
    assert bad.returncode == 2 and "isoflop.schedule" in bad.stderr and "'cosine' or 'wsd'" in bad.stderr
    law = scalelab(
        "quickstart",
        REPO / "configs/quickstart-test.yaml",
        f"out={work / 'qs'}",
        "isoflop.schedule=wsd",
        "hparams_law=true",
    )
    assert law.returncode == 2 and "isoflop.schedule: wsd" in law.stderr and "hparams_law: false" in law.stderr
    cool = scalelab(
        "quickstart", REPO / "configs/quickstart-test.yaml", f"out={work / 'qs'}", "isoflop.wsd.cooldown=1.5"
    )
    assert cool.returncode == 2 and "isoflop.wsd.cooldown" in cool.stderr
    assert not (work / "qs").exists()  # nothing ran


def test_sweep_status_json_carries_the_compute(base, work):
    path = write_spec(
        work,
        {
            "name": "st",
            "base": str(base),
            "set": SET,
            "kind": "wsd",
            "runs_dir": str(work / "runs"),
            "wsd": {"models": ["n50k"], "tokens": 8192, "fractions": [0.25, 0.5, 1.0], "warmup_steps": 2},
        },
    )
    rows = json.loads(scalelab("sweep", "status", path, "--format", "json").stdout)
    assert [x["branch_of"] for x in rows] == [None, "n50k-stable", "n50k-stable"] and [
        x["branch_step"] for x in rows
    ] == [None, 6, 13]
    for x in rows:
        assert x["computed_flops"] == pytest.approx(x["flops"] - x["shared_flops"])
    # summed: the study's compute with the stable prefix counted once, as the table's line says
    table = scalelab("sweep", "status", path).stdout
    total, separate = sum(x["computed_flops"] for x in rows), sum(x["flops"] for x in rows)
    assert f"compute: {total:.3g} FLOPs with each stable prefix counted once, {separate:.3g} as separate runs" in table
    csv = scalelab("sweep", "status", path, "--format", "csv").stdout
    assert csv.splitlines()[0].endswith("flops,shared_flops,computed_flops,branch_of,branch_step")


def test_overrides_without_a_config_apply_to_the_default_one(work):
    # `scalelab quickstart seed=S out=DIR` (docs/quickstart.md): the first key=value is an override, not a config
    # file; a wrong value then names its key (before: "config file not found: seed=...")
    bad = scalelab("quickstart", "seed=one", f"out={work / 'qs'}")
    assert bad.returncode == 2 and "seed" in bad.stderr and "config file not found" not in bad.stderr, bad.stderr
    assert not (work / "qs").exists()  # nothing ran
