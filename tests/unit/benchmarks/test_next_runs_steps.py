"""benchmarks/next_runs.py synthetic --design-steps K: the design spends each ladder rung's FLOPs in K
calls of study next, refitting after each, while the IsoFLOP ladder keeps one profile per rung."""

from __future__ import annotations

import json

import pytest

from tests.helpers import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/next_runs.py", "next_runs_bench")


def test_design_steps_split_each_rung(bench, tmp_path, capsys):
    out = tmp_path / "k2.json"
    argv = ["synthetic", "--seeds", "1", "--rounds", "1", "--bootstrap", "10", "--design-steps", "2"]
    assert bench.main([*argv, "--json", str(out)]) == 0
    curves = json.loads(out.read_text())["curves"]
    ladder, design = curves["isoflop"][0], curves["design"][0]
    assert len(ladder) == 2 and len(design) == 3  # the start, then one rung / two calls
    rung = bench.SIZES * 2 * bench.START_BUDGETS[-1]  # the first rung: 9 runs at 2e18 FLOPs
    assert ladder[1]["spent"] == pytest.approx(rung, rel=1e-9)
    first, second = design[1]["spent"], design[2]["spent"] - design[1]["spent"]
    assert 0 < first <= rung / 2 * (1 + 1e-9) and 0 < second <= rung / 2 * (1 + 1e-9)
    assert "design / isoflop" in capsys.readouterr().out


def test_design_steps_below_one_is_refused(bench):
    with pytest.raises(SystemExit, match="--design-steps must be >= 1"):
        bench.main(["synthetic", "--design-steps", "0"])
