"""`scalelab predict FIT.json DATA`: a fit record from a known law predicts held-out points within its
prediction interval, with their relative error, coverage and extrapolation flagged; every law it
serves (chinchilla approach 3, data-constrained, kaplan, moe, task-loss, accuracy, batch-lr); exit 2
when the record and the data do not match."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from scaling import fit_chinchilla
from scaling.core.errors import InputError
from scaling.fits.accuracy import SigmoidAccuracy, fit_accuracy
from scaling.fits.record import FitRecord
from scaling.fits.task_loss import fit_task_loss
from scaling.planning.predict import predict
from scaling.synthetic.runs import TRUE_CHINCHILLA, chinchilla_table
from tests.helpers import scalelab

COLUMNS = ["predicted", "loss_lo", "loss_hi", "measured", "rel_error", "inside", "extrapolation_factor"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """IsoFLOP runs of a known law at 4 budgets: the fit sees the 3 smaller, the 1e20 budget is held out."""
    tmp = tmp_path_factory.mktemp("predict")
    df = chinchilla_table(budgets=(1e17, 1e18, 1e19, 1e20), noise=0.005, seed=2)
    df[df.flops < 1e20].to_csv(tmp / "train.csv", index=False)
    df[df.flops >= 1e20].to_csv(tmp / "held.csv", index=False)
    fit_chinchilla(str(tmp / "train.csv"), bootstrap=40, top_k=8).save(tmp / "a3.json")
    return tmp


def test_held_out_budget_lies_in_its_interval_and_is_flagged_as_extrapolation(study):
    out = study / "pred.csv"
    r = scalelab("predict", study / "a3.json", study / "held.csv", "--out", out)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out)
    assert list(df.columns) == ["N", "D", "C"] + COLUMNS
    held = pd.read_csv(study / "held.csv")
    truth = TRUE_CHINCHILLA.predict(held.N, held.D)
    assert np.max(np.abs(df.predicted / truth - 1)) < 0.01  # the law, 10x beyond its largest budget
    assert df.measured.tolist() == pytest.approx(held.loss.tolist())
    assert df.rel_error.tolist() == pytest.approx(((df.predicted - df.measured) / df.measured).tolist())
    assert df.inside.mean() >= 8 / 9 and (df.loss_lo < df.predicted).all() and (df.predicted < df.loss_hi).all()
    assert df.extrapolation_factor.tolist() == pytest.approx([10.0] * len(df))
    assert "coverage" in r.stdout and "9 of 9 points lie outside the fitted range (up to 10x" in r.stdout
    # a point inside the fitted range is not flagged
    inside = chinchilla_table(budgets=(1e18,), n_per_budget=3, noise=0.0)
    p = predict(FitRecord.load(study / "a3.json"), inside)
    assert p.df.extrapolation_factor.tolist() == [1.0, 1.0, 1.0] and p.summary["loss"]["n_extrapolated"] == 0
    assert p.summary["loss"]["coverage"] == 1.0 and p.summary["loss"]["max_abs_rel_error"] < 0.01


def test_summary_json_and_a_table_without_measurements(study):
    r = scalelab("predict", study / "a3.json", study / "held.csv", "--json")
    doc = json.loads(r.stdout)
    s = doc["summary"]["loss"]
    assert s["n_measured"] == 9 and s["mean_abs_rel_error"] <= s["max_abs_rel_error"] < 0.03
    assert 0.8 <= s["coverage"] <= 1
    assert doc["conventions"]["n_kind"] == "total" and doc["conventions"]["compute"] == "6ND_total"
    assert len(doc["rows"]) == 9
    pd.read_csv(study / "held.csv").drop(columns=["loss"]).to_csv(study / "new.csv", index=False)
    r = scalelab("predict", study / "a3.json", study / "new.csv", "--out", study / "new-pred.csv")
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(study / "new-pred.csv")
    assert df.measured.isna().all() and df.inside.isna().all() and df.predicted.notna().all()
    assert "coverage" not in r.stdout


def test_record_and_table_mismatches_exit_2(study, tmp_path):
    pd.read_csv(study / "held.csv")[["N", "loss"]].to_csv(tmp_path / "noD.csv", index=False)
    r = scalelab("predict", study / "a3.json", tmp_path / "noD.csv")
    assert r.returncode == 2 and "missing column for 'D'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    a2 = tmp_path / "a2.json"
    fit_chinchilla(chinchilla_table(noise=0.0), approach=2).save(a2)
    r = scalelab("predict", a2, study / "held.csv")
    assert r.returncode == 2 and "approach-2 fit is a compute-optimal frontier" in r.stderr
    r = scalelab("predict", study / "a3.json", study / "held.csv", "--col", "G=granularity")
    assert r.returncode == 2 and "unknown role 'G'" in r.stderr
    (tmp_path / "ann.json").write_text(json.dumps({"law": "lr-annealing", "params": {}}))
    r = scalelab("predict", tmp_path / "ann.json", study / "held.csv")
    assert r.returncode == 2 and "predict-curve" in r.stderr


def test_task_loss_and_accuracy_per_task(tmp_path):
    rng = np.random.default_rng(4)
    rows = []
    for task, scale in (("a", 1.0), ("b", 0.8)):
        t = chinchilla_table(budgets=(1e17, 1e18, 1e19), n_per_budget=5, noise=0.0)
        t["loss"] = t["loss"] * scale * np.exp(0.004 * rng.standard_normal(len(t)))
        rows.append(t.assign(task=task))
    tl_tab = pd.concat(rows, ignore_index=True)
    big = tl_tab.flops >= 1e19
    rec = fit_task_loss(tl_tab[~big].reset_index(drop=True), columns={"task": "task"}, bootstrap=10)
    tl_tab[big].to_csv(tmp_path / "tl.csv", index=False)
    rec.save(tmp_path / "tl.json")
    r = scalelab("predict", tmp_path / "tl.json", tmp_path / "tl.csv", "--col", "task=task", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {row["task"] for row in doc["rows"]} == {"a", "b"} and doc["summary"]["loss"]["max_abs_rel_error"] < 0.03
    # accuracy: two tasks' sigmoids, a held-out range of losses
    sig = {"a": SigmoidAccuracy(0.6, 0.25, -5.0, 3.0), "b": SigmoidAccuracy(0.4, 0.5, -4.0, 2.5)}
    acc = []
    for task, s in sig.items():
        L = np.linspace(2.0, 4.0, 40)
        acc.append(pd.DataFrame({"loss": L, "acc": s.predict(L) + rng.normal(0, 0.01, L.size), "task": task}))
    acc = pd.concat(acc, ignore_index=True)
    fit = fit_accuracy(acc.iloc[::2], bootstrap=30)
    p = predict(fit, acc.iloc[1::2].reset_index(drop=True))
    assert list(p.df.columns) == [
        "task",
        "loss",
        "predicted",
        "acc_lo",
        "acc_hi",
        "measured",
        "rel_error",
        "inside",
        "extrapolation_factor",
    ]
    assert p.summary["acc"]["coverage"] >= 0.85
    assert p.summary["acc"]["n_extrapolated"] == 2  # each task's loss 4.0, beyond the fitted 2.0-3.95
    p = predict(fit, pd.DataFrame({"loss": [1.5, 3.0], "task": ["a", "a"]}))
    assert p.df.extrapolation_factor.tolist() == pytest.approx([2.0 / 1.5, 1.0], rel=0.05)
    assert p.df.measured.isna().all()
    with pytest.raises(InputError, match="no task of the data is in the accuracy fit"):
        predict(fit, pd.DataFrame({"loss": [3.0], "acc": [0.5], "task": ["zzz"]}))
