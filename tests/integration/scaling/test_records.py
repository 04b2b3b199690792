"""`scalelab plan` reads fit records written by ddc73a7 (tests/fixtures/ddc73a7) and writes a versioned plan;
`scalelab fit` writes today the records ddc73a7 wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scaling.planning.record import SCHEMA_VERSION as PLAN_VERSION
from scaling.planning.record import PlanRecord
from scaling.synthetic.runs import batch_lr_sweep, chinchilla_table
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


def _without_timings(obj):
    """A record's JSON less its wall-clock figures (`fit_seconds`, the bootstrap's `seconds`) and paths."""
    if isinstance(obj, dict):
        return {k: _without_timings(v) for k, v in obj.items() if k not in ("fit_seconds", "seconds", "source")}
    if isinstance(obj, list):
        return [_without_timings(v) for v in obj]
    return obj


@pytest.mark.parametrize("law", ["chinchilla", "batch-lr"])
def test_a_fit_today_writes_what_ddc73a7_wrote(law, tmp_path):
    """The same data and options (tests/fixtures/ddc73a7/README.md) give the same record: every key in
    the same place, every number to the last digit, but the timings."""
    if law == "chinchilla":
        table, extra = tmp_path / "table.csv", ["--bootstrap", "8", "--seed", "0"]
        chinchilla_table(budgets=(1e17, 1e18, 1e19), n_per_budget=7, seed=0).to_csv(table, index=False)
        old = json.loads((OLD / "fit_chinchilla.json").read_text())
    else:
        table, extra = tmp_path / "bslr.csv", []
        batch_lr_sweep().to_csv(table, index=False)
        old = json.loads((OLD / "fit_batch_lr.json").read_text())
    out = tmp_path / "fit.json"
    r = scalelab("fit", law, table, *extra, "--out", out)
    assert r.returncode == 0, r.stderr
    new = json.loads(out.read_text())
    assert list(new) == list(old)
    assert _without_timings(new) == _without_timings(old)
