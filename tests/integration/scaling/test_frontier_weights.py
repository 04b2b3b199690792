"""Approach 2's frontier regression: OLS over budgets by default (Hoffmann et al. 2022, Porian et al.
2024), inverse-variance weights as an option; both recover a known truth and differ in spread as
weighted least squares theory says; older records read as inverse-variance."""

from __future__ import annotations

import json

from tests.helpers import scalelab
from tests.unit.scaling.test_frontier_weights import BUDGETS, isoflop  # noqa: F401 (shared with the unit tests)


def test_cli_frontier_weights(tmp_path):
    table = tmp_path / "iso.csv"
    isoflop(seed=3).to_csv(table, index=False)
    r = scalelab("fit", "chinchilla", table, "--approach", "2", "--frontier-weights", "inverse-variance", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["settings"]["frontier_weights"] == "inverse-variance"
    r = scalelab("fit", "chinchilla", table, "--frontier-weights", "ols")
    assert r.returncode == 2 and "applies to approach 2 only" in r.stderr
