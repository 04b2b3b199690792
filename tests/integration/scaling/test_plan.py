"""`plan`: the run it emits is the best preset at the budget, carries the fits' warnings and recipe,
and its loss interval is a prediction interval."""

from __future__ import annotations

from tests.helpers import scalelab
from tests.unit.scaling.test_plan import tree_fit  # noqa: F401 (shared with the unit tests)


def test_plan_refuses_a_budget_in_another_convention(tree_fit, tmp_path):
    fit = tree_fit.save(tmp_path / "fit.json")
    plan = ["plan", "--fit", fit, "--compute", "3e14", "--vocab-size", "512"]
    r = scalelab(*plan, "--compute-kind", "6ND_total")
    assert r.returncode == 2 and "differs from the chinchilla fit's convention (trainer_flops)" in r.stderr
    r = scalelab(*plan)
    assert r.returncode == 0, r.stderr
    assert "trainer_flops; N = non_embedding parameters" in r.stdout and "predicted loss:" in r.stdout
