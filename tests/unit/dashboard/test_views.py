"""The dashboard's MoE scaling, Plan, chain and lr-annealing endpoints (HTTP level): the numbers they
send are the laws' and `scalelab plan`'s own, from fit records made by the real CLI (in-process) on
synthetic data with a known truth; bad inputs are 400s naming the input."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx", reason="fastapi.testclient needs httpx")


def test_fit_checks_per_law():
    from dashboard.stores.fit_checks import not_identified

    assert (
        not_identified({"law": "accuracy", "params": {"a": 0.4, "b": 0.0, "k": -5.0, "L0": 2.0}}) == []
    )  # b = 0: a floor, not an exponent
    assert (
        not_identified(
            {"law": "moe", "settings": {"law": "krajewski"}, "params": {"a": 0.0, "alpha": 0.1, "beta": 0.1}}
        )
        == []
    )
    assert not_identified({"law": "moe", "settings": {"law": "krajewski"}, "params": {"alpha": 1e-12, "beta": 0.1}})
    w = "{} of 8 bootstrap resamples failed to fit (the resample holds no curve with an lr decrease: C not identified)"
    assert not_identified({"law": "lr-annealing", "params": {}, "warnings": [w.format(2)]}) == []
    assert not_identified({"law": "lr-annealing", "params": {}, "warnings": [w.format(4)]}) == [w.format(4)]
    rec = {
        "law": "task-loss",
        "params": {},
        "tasks": {"a": {"params": {"alpha": 0.3, "beta": 0.0}}, "b": {"params": {"alpha": 0.3, "beta": 0.3}}},
    }
    assert (
        not_identified(rec, "b") == []
        and not_identified(rec, "a")
        and not_identified(rec)[0].startswith("task a: beta")
    )
