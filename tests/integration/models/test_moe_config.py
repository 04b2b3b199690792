"""MoE config validation: clear errors naming the key, exit code 2 from `scalelab train`."""

from __future__ import annotations

import pytest

from tests.helpers import run_cli
from tests.unit.models.test_moe_config import TINY_MOE  # shared with the unit tests


@pytest.mark.parametrize(
    "override,expect",
    [
        ("model.moe.top_k=9", "top_k=9 must be <= model.moe.num_experts=8"),
        ("model.moe.router=switchy", "expert_choice"),
    ],
)
def test_cli_exits_2_before_any_work(tmp_path, override, expect):
    res = run_cli(["train", str(TINY_MOE), override, "--run-dir", str(tmp_path / "run")], cwd=tmp_path, timeout=120)
    assert res.returncode == 2, res.stderr[-2000:]
    assert expect in res.stderr + res.stdout
    assert not (tmp_path / "run").exists()
