"""optim.name as a sweep axis: crossed with IsoFLOP and batch/LR runs, named per optimizer, and
invalid combinations refused at plan time (exit 2)."""

from __future__ import annotations

from tests.helpers import REPO

OPTIM_TINY = str(REPO / "configs/sweeps/optim-tiny.yaml")


def test_isoflop_study_runs_every_point_once_per_optimizer():
    from launch.sweep.expand import plan

    p = plan(OPTIM_TINY)
    by = {}
    for r in p.runs:
        by.setdefault(r.axes["optim.name"], []).append(r)
        assert r.name.startswith(r.axes["optim.name"] + "-") and r.cfg.optim.name == r.axes["optim.name"]
    assert set(by) == {"adamw", "muon"} and len(by["adamw"]) == len(by["muon"]) == 12

    def strip(rs):
        return [(r.name.split("-", 1)[1], r.tokens, r.axes["budget"]) for r in rs]

    assert strip(by["adamw"]) == strip(by["muon"])  # the same IsoFLOP points
    assert len({r.id for r in p.runs}) == len({r.name for r in p.runs}) == 24
