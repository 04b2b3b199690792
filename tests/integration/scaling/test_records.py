"""`scalelab plan` reads fit records written by ddc73a7 (tests/fixtures/ddc73a7) and writes a versioned plan."""

from __future__ import annotations

import json
from pathlib import Path

from scaling.planning.record import SCHEMA_VERSION as PLAN_VERSION
from scaling.planning.record import PlanRecord
from tests.helpers import scalelab

OLD = Path(__file__).parents[2] / "fixtures" / "ddc73a7"


def test_plan_cli_writes_a_versioned_plan_from_old_records(tmp_path):
    out = tmp_path / "plan.json"
    r = scalelab(
        "plan", OLD / "fit_chinchilla.json", "--fit", OLD / "fit_batch_lr.json", "--compute", "1e20",
        "--vocab-size", "512", "--out", out, "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    assert printed == json.loads(out.read_text()) and printed["schema_version"] == PLAN_VERSION
    assert PlanRecord.load(out).run == printed["run"]
