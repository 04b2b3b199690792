"""optim.name as a sweep axis: crossed with IsoFLOP and batch/LR runs, named per optimizer, and
invalid combinations refused at plan time (exit 2)."""

from __future__ import annotations

import json

from tests.helpers import REPO, requires_corpus, run_cli
from tests.unit.launch.test_sweep_optim import OPTIM_TINY  # shared with the unit tests


@requires_corpus
def test_batch_lr_and_grid_sweeps_vary_the_optimizer():
    from launch.sweep.expand import plan

    p = plan(str(REPO / "configs/sweeps/bs-lr-tiny.yaml"), ["axes.optim.name=[adamw, muon]"])
    names = [r.name for r in p.runs]
    assert len(names) == 36 and "muon-n14k-b1-lr2.4e-3" in names and "adamw-n14k-b1-lr2.4e-3" in names
    res = run_cli(
        [
            "sweep",
            "plan",
            str(REPO / "configs/sweeps/isoflop-tiny.yaml"),
            "--set",
            "kind=grid",
            "--set",
            "axes={optim.name: [adamw, muon], model: [n14k]}",
            "--format",
            "json",
        ],
        REPO,
    )
    assert res.returncode == 0, res.stderr[-1500:]
    assert [r["name"] for r in json.loads(res.stdout)] == ["adamw-n14k", "muon-n14k"]


def test_muon_with_zero2_is_refused_at_plan_time():
    res = run_cli(["sweep", "plan", OPTIM_TINY, "--set", "set.deepspeed.zero_stage=2"], REPO)
    assert res.returncode == 2
    assert "optim.name muon supports deepspeed.zero_stage 0 or 1 (got 2)" in res.stderr
    assert "muon-c1e11-n14k" in res.stderr  # names the run
