"""`scalelab fit accuracy TABLE`: the sigmoid Acc(L) = a / (1 + exp(-k (L - L0))) + b recovers known
parameters, per task, with bootstrap intervals and warnings for no signal and flat fits."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.helpers import REPO, run_cli
from tests.unit.scaling.test_fit_accuracy import TRUTH, table  # shared with the unit tests


def test_noisy_tasks_are_fitted_separately_with_intervals(tmp_path):
    easy = {"a": 0.7, "b": 0.25, "k": -6.0, "L0": 3.2}
    df = pd.concat(
        [table(noise=0.01, seed=1).assign(name="hellaswag"), table(easy, noise=0.01, seed=2).assign(name="arc_easy")]
    )
    path = tmp_path / "acc.csv"
    df.rename(columns={"loss": "bpb", "acc": "accuracy"}).to_csv(path, index=False)
    out = tmp_path / "fit.json"
    r = run_cli(
        [
            "fit",
            "accuracy",
            str(path),
            "--col",
            "loss=bpb",
            "--col",
            "acc=accuracy",
            "--col",
            "task=name",
            "--bootstrap",
            "40",
            "--out",
            str(out),
        ],
        REPO,
    )
    assert r.returncode == 0, r.stderr
    assert "task arc_easy: a = " in r.stdout and "task hellaswag: a = " in r.stdout
    rec = json.loads(out.read_text())
    for name, truth in (("hellaswag", TRUTH), ("arc_easy", easy)):
        t = rec["tasks"][name]
        for k, v in truth.items():
            assert t["params"][k] == pytest.approx(v, rel=0.1, abs=0.02)
            lo, hi = t["intervals"][k]
            assert lo < t["params"][k] < hi
        assert t["n_points"] == 30


@pytest.mark.parametrize(
    "args, message",
    [
        (["--col", "loss=nope"], "column 'nope' for loss not found"),
        (["--col", "size=x"], "unknown role 'size'"),
    ],
)
def test_bad_tables_exit_2(tmp_path, args, message):
    path = tmp_path / "t.csv"
    table().to_csv(path, index=False)
    r = run_cli(["fit", "accuracy", str(path)] + args, REPO)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_percentages_and_trees_without_runs_are_refused(tmp_path):
    path = tmp_path / "t.csv"
    table().assign(acc=lambda d: d.acc * 100).to_csv(path, index=False)
    r = run_cli(["fit", "accuracy", str(path)], REPO)
    assert r.returncode == 2 and "fractions, not percentages" in r.stderr
    r = run_cli(["fit", "accuracy", str(tmp_path)], REPO)  # a directory is read as a run-directory tree
    assert r.returncode == 2 and "no finished runs" in r.stderr
