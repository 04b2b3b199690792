"""The fit record and the plan are typed, versioned records that read files written before they were:
tests/fixtures/ddc73a7/ holds a fit record and a plan written by commit ddc73a7 (synthetic data:
`scalelab fit chinchilla`/`batch-lr` on scaling.synthetic tables, `scalelab plan --device h100-sxm`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scaling.core.errors import InputError
from scaling.fits.record import SCHEMA_VERSION as FIT_VERSION
from scaling.fits.record import FitRecord
from scaling.planning.budget import BudgetOptions, build_plan
from scaling.planning.record import SCHEMA_VERSION as PLAN_VERSION
from scaling.planning.record import PlanRecord

OLD = Path(__file__).parents[2] / "fixtures" / "ddc73a7"


def test_an_old_fit_record_loads_typed_and_writes_back_the_same_json():
    raw = json.loads((OLD / "fit_chinchilla.json").read_text())
    rec = FitRecord.load(OLD / "fit_chinchilla.json")
    assert rec.schema_version == raw["schema_version"] == FIT_VERSION
    assert rec.law_name == rec["law"] == "chinchilla" and rec.approach == 3 and rec.n_points == raw["n_points"]
    assert rec.params == raw["params"] and rec.intervals == raw["intervals"] and rec.warnings == raw["warnings"]
    assert rec.conventions == raw["conventions"] and rec.bootstrap["n"] == 8
    # dict access, kept for the notebooks: [], get, in, iteration, dict()
    assert rec["params"]["alpha"] == raw["params"]["alpha"] and rec.get("no such key") is None
    assert "bootstrap" in rec and "no such key" not in rec and list(rec) == list(raw)
    assert dict(rec) == raw and rec == raw
    assert json.loads(rec.to_json()) == raw and list(json.loads(rec.to_json())) == list(raw)  # same keys, same order
    assert float(rec.law().predict(1e9, 2e10)) > rec.params["E"]


def test_an_old_plan_loads_as_version_0_and_the_new_planner_agrees_with_it(tmp_path):
    raw = json.loads((OLD / "plan.json").read_text())
    old = PlanRecord.load(OLD / "plan.json")
    assert "schema_version" not in raw and old.schema_version == 0
    assert old.compute == raw["compute"] == 1e20 and old.N_opt == raw["N_opt"] and old.run["tokens"] > 0
    assert old.cost == raw["cost"] and old["memory"] == raw["memory"]
    assert old.to_dict() == {**raw, "schema_version": 0}
    fits = [FitRecord.load(OLD / "fit_chinchilla.json"), FitRecord.load(OLD / "fit_batch_lr.json")]
    opts = BudgetOptions(compute=1e20, device="h100-sxm", num_devices=8, runs=str(tmp_path))
    new = build_plan(fits, opts, {"vocab_size": 512})
    assert isinstance(new, PlanRecord) and new.schema_version == PLAN_VERSION
    for k in ("N_opt", "D_opt", "loss_at_optimum", "N_opt_interval", "D_opt_interval", "conventions", "fits"):
        assert new[k] == pytest.approx(raw[k]) if isinstance(raw[k], float) else new[k] == raw[k], k
    for k in ("N", "tokens", "loss", "lr", "batch_tokens", "model"):
        assert new.run[k] == raw["run"][k], k


def test_a_plan_keeps_the_keys_it_does_not_know_where_they_were():
    raw = json.loads((OLD / "plan.json").read_text())
    items = list(raw.items())
    newer = dict([*items[:3], ("verdict", {"go": True}), *items[3:]])  # a key a newer planner writes
    plan = PlanRecord.from_dict({**newer, "schema_version": PLAN_VERSION + 1})
    assert plan.other == {"verdict": {"go": True}} and plan["verdict"] == {"go": True}
    assert list(json.loads(plan.to_json())) == [*newer, "schema_version"] and plan.schema_version == PLAN_VERSION + 1
    plan["layout"] = {"tp": 2}  # a section a newer planner adds: set by key, written back
    del plan["verdict"]
    assert json.loads(plan.to_json())["layout"] == {"tp": 2} and "verdict" not in plan.to_dict()
    copy = plan.copy()
    assert type(copy) is PlanRecord and copy == plan and copy.schema_version == plan.schema_version
    plan.N_opt = 5.0  # a typed field set by attribute is a key too
    assert plan["N_opt"] == 5.0 and json.loads(plan.to_json())["N_opt"] == 5.0


def test_a_file_that_is_no_record_is_refused_with_its_name(tmp_path):
    bad = tmp_path / "list.json"
    bad.write_text("[1, 2]")
    with pytest.raises(InputError, match="list.json: not a fit record"):
        FitRecord.load(bad)
    with pytest.raises(InputError, match="list.json: not a plan"):
        PlanRecord.load(bad)
