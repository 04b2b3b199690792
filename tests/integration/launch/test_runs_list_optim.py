"""The run registry knows the optimizer: `optim` from each run's config.yaml (`optim.name`; a
config written before the key existed trained with the schema default, adamw), shown and filtered
by `scalelab runs list`."""

from __future__ import annotations

import contextlib
import io

from launch.cli import main as scalelab
from tests.unit.launch.test_runs_list_optim import _runs  # shared with the unit tests


def test_runs_list_shows_and_filters_the_optimizer(tmp_path):
    root = _runs(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert scalelab(["runs", "list", str(root), "--format", "csv"]) == 0
    lines = out.getvalue().splitlines()
    header = lines[0].split(",")
    assert header[:3] == ["run", "status", "optim"]
    assert sorted(line.split(",")[2] for line in lines[1:]) == ["adamw", "adamw", "muon"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert scalelab(["runs", "list", str(root), "--optim", "muon"]) == 0
    text = out.getvalue()
    assert "mu " in text and "old" not in text and "1 runs under" in text
