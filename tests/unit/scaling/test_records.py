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
    assert old.to_dict() == raw and "schema_version" not in old and old.get("schema_version") is None
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
    plan = PlanRecord.from_dict({**newer, "schema_version": PLAN_VERSION})
    assert plan.other == {"verdict": {"go": True}} and plan["verdict"] == {"go": True}
    assert list(json.loads(plan.to_json())) == [*newer, "schema_version"] and plan.schema_version == PLAN_VERSION
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


@pytest.mark.parametrize("name", ["fit_chinchilla.json", "fit_batch_lr.json", "plan.json"])
def test_an_old_file_saved_again_is_the_same_bytes(name, tmp_path):
    """Keys, order and values: what a ddc73a7 file held is what a load and save writes (a version-0 plan
    gains no schema_version), so reading a file with new code never rewrites it behind the user's back."""
    cls = PlanRecord if name == "plan.json" else FitRecord
    rec = cls.load(OLD / name)
    assert rec.save(tmp_path / name).read_bytes() == (OLD / name).read_bytes()
    assert rec.copy().to_json() == rec.to_json()


@pytest.mark.parametrize("cls", [FitRecord, PlanRecord])
def test_a_file_of_a_newer_schema_version_is_refused_naming_both_versions(cls, tmp_path):
    name = "plan.json" if cls is PlanRecord else "fit_chinchilla.json"
    raw = json.loads((OLD / name).read_text())
    newer = tmp_path / name
    newer.write_text(json.dumps({**raw, "schema_version": cls.SCHEMA_VERSION + 1}))
    with pytest.raises(InputError, match=rf"{name}: schema_version {cls.SCHEMA_VERSION + 1} is newer than"):
        cls.load(newer)
    newer.write_text(json.dumps({**raw, "schema_version": "1"}))
    with pytest.raises(InputError, match="schema_version must be a whole number"):
        cls.load(newer)


@pytest.mark.parametrize("cls", [FitRecord, PlanRecord])
def test_save_is_atomic_a_failed_write_leaves_the_old_file(cls, tmp_path, monkeypatch):
    import os

    name = "plan.json" if cls is PlanRecord else "fit_chinchilla.json"
    path = tmp_path / name
    path.write_text("the old file\n")
    rec = cls.load(OLD / name)

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        rec.save(path)
    assert path.read_text() == "the old file\n" and sorted(p.name for p in tmp_path.iterdir()) == [name]
    monkeypatch.undo()
    assert json.loads(rec.save(path).read_text()) == rec.to_dict()
