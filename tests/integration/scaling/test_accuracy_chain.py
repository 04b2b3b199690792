"""The loss-to-accuracy chain end to end on synthetic run directories with a known truth:
`fit task-loss` (OLMo step 1) and `fit accuracy` (step 2) read each run's evals/<step>.json and
recover the laws; `plan --accuracy --task-loss` predicts a new run's accuracy inside its interval
and carries both fits' warnings; the validation-loss variant chains from the plan's loss."""

from __future__ import annotations

import json

import pytest

from scaling.fits.accuracy import SigmoidAccuracy
from scaling.laws.loss import ChinchillaLaw
from tests.helpers import REPO, run_cli

# shared with the unit tests
from tests.unit.scaling.test_accuracy_chain import DS, LAW, NS, SIG, VAL, clean_runs, write_runs  # noqa: F401


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """Noisy runs and the three fits through the CLI (chinchilla, task-loss, accuracy), once."""
    tmp = tmp_path_factory.mktemp("chainfits")
    runs = write_runs(tmp / "runs", noise=0.01, acc_noise=0.01, seed=1)
    fits = tmp / "fits"
    for args in (
        ["chinchilla", str(runs), "--bootstrap", "30", "--out", str(fits / "ch.json")],
        ["task-loss", str(runs), "--tasks", "blimp_x", "--bootstrap", "30", "--out", str(fits / "tl.json")],
        ["accuracy", str(runs), "--bootstrap", "30", "--out", str(fits / "acc.json")],
    ):
        r = run_cli(["fit", *args], REPO)
        assert r.returncode == 0, r.stderr
    return runs, fits


def test_plan_chain_predicts_a_new_runs_accuracy_within_its_interval(fitted):
    from scaling.planning.report import format_plan

    _, fits = fitted
    r = run_cli(
        [
            "plan",
            "--fit",
            str(fits / "ch.json"),
            "--compute",
            "5e14",
            "--accuracy",
            str(fits / "acc.json"),
            "--task-loss",
            str(fits / "tl.json"),
            "--json",
        ],
        REPO,
    )
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    run = plan["run"]
    a = plan["accuracy"]["blimp_x"]
    truth_loss = float(ChinchillaLaw(**LAW).predict(run["N"], run["tokens"]))
    truth_acc = float(SigmoidAccuracy(**SIG).predict(truth_loss))
    assert a["task_loss"] == pytest.approx(truth_loss, rel=0.03)
    assert a["task_loss_interval"][0] < truth_loss < a["task_loss_interval"][1]
    assert a["acc"] == pytest.approx(truth_acc, abs=0.02)
    assert a["interval"][0] < truth_acc < a["interval"][1] and a["interval"][1] - a["interval"][0] < 0.2
    assert plan["accuracy_basis"]["loss_from"].startswith("the task-loss fit")
    assert any(w.startswith("accuracy fit: hard: every accuracy is within 0.02 of chance") for w in plan["warnings"])
    assert "accuracy chain: task hard has no task-loss law in the --task-loss fit: no prediction" in plan["warnings"]
    assert set(plan["accuracy"]) == {"blimp_x"}
    text = format_plan(plan)  # what `plan` prints without --json
    assert f"blimp_x: acc {a['acc']:.3f} [{a['interval'][0]:.3f}, {a['interval'][1]:.3f}]" in text
    assert "loss = gold_bpb from the task-loss fit" in text


def test_validation_loss_accuracy_chains_from_the_plans_loss(tmp_path, fitted):
    runs, fits = fitted
    r = run_cli(
        [
            "fit",
            "accuracy",
            str(runs),
            "--loss-metric",
            "val_loss",
            "--tasks",
            "blimp_x",
            "--bootstrap",
            "20",
            "--out",
            str(tmp_path / "acc_val.json"),
        ],
        REPO,
    )
    assert r.returncode == 0 and "L = val_loss (the run's validation loss" in r.stdout, r.stderr
    r = run_cli(
        [
            "plan",
            "--fit",
            str(fits / "ch.json"),
            "--compute",
            "5e14",
            "--accuracy",
            str(tmp_path / "acc_val.json"),
            "--json",
        ],
        REPO,
    )
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert "predicted validation loss" in plan["accuracy_basis"]["loss_from"]
    assert plan["accuracy"]["blimp_x"]["task_loss"] == pytest.approx(plan["run"]["loss"])


@pytest.mark.parametrize(
    "which, given, message",
    [
        ("accuracy", "acc.json", "give --task-loss TL.json"),  # a bpb accuracy fit needs the task-loss law
        ("task-loss", "tl.json", "--task-loss feeds --accuracy"),
        ("fit", "tl.json", "not an allocation law: give it with --task-loss"),
    ],
)
def test_fits_that_do_not_chain_exit_2(fitted, which, given, message):
    _, fits = fitted
    r = run_cli(["plan", "--fit", str(fits / "ch.json"), "--compute", "5e14", f"--{which}", str(fits / given)], REPO)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_bad_reading_options_and_empty_trees_exit_2(tmp_path, clean_runs):
    r = run_cli(["fit", "accuracy", str(clean_runs), "--loss-metric", "val_loss", "--steps", "all"], REPO)
    assert r.returncode == 2 and "needs --steps last" in r.stderr
    r = run_cli(["fit", "task-loss", str(clean_runs), "--tasks", "nope"], REPO)
    assert r.returncode == 2 and "no evaluation of nope" in r.stderr and "blimp_x" in r.stderr
    empty = tmp_path / "r"
    (empty / "a").mkdir(parents=True)
    (empty / "a" / "summary.json").write_text(
        json.dumps({"status": "done", "params": 1e6, "tokens": 2e7, "final_val_loss": 3.0})
    )
    r = run_cli(["fit", "accuracy", str(empty)], REPO)
    assert r.returncode == 2 and "no evaluated runs" in r.stderr and "scalelab sweep eval" in r.stderr


def test_task_loss_from_a_table_with_a_task_column(tmp_path):
    rows = [
        {"params": N, "tokens": D, "bpb": float(ChinchillaLaw(**LAW).predict(N, D)) * s, "name": t}
        for t, s in (("a", 1.0), ("b", 1.2))
        for N in NS
        for D in DS
    ]
    import pandas as pd

    path = tmp_path / "t.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    r = run_cli(["fit", "task-loss", str(path), "--col", "loss=bpb", "--col", "task=name", "--json"], REPO)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["tasks"]["a"]["params"]["alpha"] == pytest.approx(LAW["alpha"], rel=2e-3)
    assert rec["tasks"]["b"]["params"]["E"] == pytest.approx(LAW["E"] * 1.2, rel=2e-3)
    # the record keeps the task column, so the dashboard rereads the table into its two tasks
    assert rec["settings"]["columns"] == {"loss": "bpb", "task": "name"}
    from dashboard.stores.fit_data import read

    rows = read(rec, path)
    assert sorted({r["task"] for r in rows}) == ["a", "b"] and len(rows) == 2 * len(NS) * len(DS)
