"""benchmarks/moe_paired_stats.py against hand-worked numbers and a known synthetic truth, and the
router study's design (benchmarks/moe_router_protocol.py): equal FLOPs within a shape, paired
seeds, the stated budget and power."""

from __future__ import annotations

import math
import random
import sys

import pytest

from tests.helpers import REPO, load_script


def load(name):
    sys.path.insert(0, str(REPO / "benchmarks"))
    return load_script(f"benchmarks/{name}.py")


@pytest.fixture(scope="module")
def ps():
    return load("moe_paired_stats")


def test_paired_difference_and_t_interval(ps):
    base = {0: 3.00, 1: 3.10, 2: 2.90, 3: 3.05}
    arm = {0: 2.98, 1: 3.09, 2: 2.87, 3: 3.04, 9: 1.0}  # seed 9 has no pair: left out
    d = ps.paired_difference(arm, base)
    diffs = [-0.02, -0.01, -0.03, -0.01]
    sd = math.sqrt(sum((x + 0.0175) ** 2 for x in diffs) / 3)
    half = 3.182446305284263 * sd / 2  # t(0.975, 3)
    assert d["seeds"] == [0, 1, 2, 3] and d["mean"] == pytest.approx(-0.0175)
    assert d["lo"] == pytest.approx(-0.0175 - half) and d["hi"] == pytest.approx(-0.0175 + half)
    assert d["excludes_zero"] and d["percent"] == pytest.approx(-0.0175 / 3.0125 * 100)


def test_min_detectable_difference_matches_simulated_power(ps):
    """At the stated MDE a paired t test over 8 seeds rejects about 80% of the time (simulation)."""
    mde = ps.min_detectable_difference(0.013, 8)
    assert mde == pytest.approx((2.364624251592785 + 0.8960296443137653) * 0.013 / math.sqrt(8), rel=1e-6)
    rng = random.Random(0)
    hits = 0
    for _ in range(2000):
        d = ps.t_interval([rng.gauss(mde, 0.013) for _ in range(8)])
        hits += d["lo"] > 0 or d["hi"] < 0
    assert 0.74 < hits / 2000 < 0.86


def test_compute_multiplier_on_power_law_curves(ps):
    """L(C) = 2 + 10 C^-0.1: an arm whose curve is the baseline's at 1.5x the compute has multiplier 1.5."""

    def curve(scale):
        return [(c, 2 + 10 * (scale * c) ** -0.1) for c in [1e9 * 1.2**i for i in range(40)]]

    base, better, worse = curve(1.0), curve(1.5), curve(1 / 1.5)
    assert ps.compute_multiplier(better, base) == pytest.approx(1.5, rel=0.01)
    assert ps.compute_multiplier(worse, base) == pytest.approx(1 / 1.5, rel=0.01)
    assert ps.compute_multiplier(base, base) == pytest.approx(1.0)
    b = ps.bootstrap_multiplier([1.4, 1.5, 1.6, 1.5])
    assert b["lo"] <= b["mean"] <= b["hi"] and b["mean"] == pytest.approx((1.4 * 1.5 * 1.6 * 1.5) ** 0.25)
    assert ps.equal_compute({"a": 1.015, "b": 1.03, "base": 1.0}, "base")["a"]["ok"]
    assert not ps.equal_compute({"a": 1.015, "b": 1.03, "base": 1.0}, "base")["b"]["ok"]


def test_study_design_pairs_seeds_at_equal_flops(tmp_path):
    proto = load("moe_router_protocol")
    from launch.sweep.expand import plan

    for size in ("n100k", "n200k"):
        spec = proto.study_spec(size, "final", None, None, tmp_path)
        p = plan(proto.write_spec(spec, tmp_path / f"{size}.yaml"))
        seeds = proto.arm_seeds(size, "final")
        runs = proto.runs_for(p, seeds)
        assert len(runs) == proto.budget(size, "final")["runs"] == 2 * (3 * 8 + 3)
        for shape in proto.SHAPES:
            mine = [r for r in runs if r.axes["extras.arm"].startswith(shape)]
            flops = {r.flops for r in mine}
            assert max(flops) / min(flops) - 1 < 1e-9  # equal config FLOPs within a shape
            by_seed = {}
            for r in mine:
                by_seed.setdefault(r.axes["seed"], set()).add(r.cfg.train.seed)
            assert all(v == {s} for s, v in by_seed.items())  # every arm at a seed trains with that seed
        assert {r.cfg.train.global_batch_size // r.cfg.train.micro_batch_size for r in runs} == {4}
        assert all(r.cfg.model.moe.capacity_factor is None for r in runs)  # dropless
