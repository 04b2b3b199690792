"""Sweep kind `moe`: experts x granularity x active size x tokens expand into dense and MoE runs with
the right shapes, impossible pairs are skipped and listed, bad specs exit 2 naming the key, and the
shipped tiny preset plans (no training here: fast)."""

from __future__ import annotations

from tests.helpers import scalelab, write_spec
from tests.unit.launch.test_sweep_moe import base  # noqa: F401 (shared with the unit tests)


def test_bad_moe_specs_exit_2_naming_the_problem(base, work):
    cases = [
        ({"models": ["n50k"], "experts": [4], "expansion": [4]}, "exactly one of `experts`"),
        ({"models": ["n50k"], "experts": [4], "settings": {"num_experts": 8}}, "num_experts: set by the sweep"),
        ({"models": ["n50k"], "expansion": [4], "granularity": [0]}, "moe.granularity"),
        (
            {"models": ["n50k"], "expansion": [4], "tokens": [1e4], "tokens_per_param": [2]},
            "`tokens` or `tokens_per_param`",
        ),
        ({"models": ["n50k"], "experts": [4], "router": "x"}, "moe.router: unknown key"),
    ]
    for i, (moe, msg) in enumerate(cases):
        path = write_spec(work, {"name": f"b{i}", "base": str(base), "kind": "moe", "moe": moe})
        r = scalelab("sweep", "plan", path)
        assert r.returncode == 2 and msg in r.stderr, (moe, r.stderr)
    path = write_spec(work, {"name": "none", "base": str(base), "kind": "moe"})
    r = scalelab("sweep", "plan", path)
    assert r.returncode == 2 and "kind 'moe' needs a non-empty `moe` section" in r.stderr
