"""`scalelab predict FIT.json DATA`: a fit record from a known law predicts held-out points within its
prediction interval, with their relative error, coverage and extrapolation flagged; every law it
serves (chinchilla approach 3, data-constrained, kaplan, moe, task-loss, accuracy, batch-lr); exit 2
when the record and the data do not match."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import scalelab

from scaling import fit_batch_lr, fit_chinchilla, fit_kaplan
from scaling.accuracy import SigmoidAccuracy, fit_accuracy
from scaling.errors import InputError
from scaling.laws import KAPLAN_2020_ND, MUENNIGHOFF_2023
from scaling.moe_fit import fit_moe
from scaling.moe_synthetic import krajewski_table
from scaling.predict import predict
from scaling.record import FitRecord
from scaling.synthetic import TRUE_CHINCHILLA, batch_lr_sweep, chinchilla_table, data_constrained_table
from scaling.task_loss import fit_task_loss

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


def test_data_constrained_applies_unique_tokens():
    df = data_constrained_table(MUENNIGHOFF_2023, noise=0.003, seed=3, unique=(3e8, 1e9, 3e9),
                                models=(3e7, 1e8, 3e8, 1e9),
                                epochs=(1, 2, 4, 8, 16, 32))
    big = df.N * df.D >= 1e9 * 3e9 * 16  # the largest repeated-data runs
    rec = fit_chinchilla(df[~big].reset_index(drop=True), law="data-constrained", top_k=8, bootstrap=10)
    p = predict(rec, df[big].reset_index(drop=True))
    assert list(p.df.columns)[:4] == ["N", "D", "U", "C"] and p.conventions["unique_tokens"] == "column U"
    assert p.summary["loss"]["max_abs_rel_error"] < 0.02 and p.summary["loss"]["coverage"] >= 0.75
    with pytest.raises(InputError, match="unique tokens: a column U"):
        predict(rec, df[big].drop(columns=["U"]))


def test_kaplan_and_moe_laws():
    rng = np.random.default_rng(0)
    N, D = np.meshgrid(np.geomspace(1e7, 1e9, 5), np.geomspace(1e9, 1e11, 5))
    tab = pd.DataFrame({"N": N.ravel(), "D": D.ravel()})
    tab["loss"] = KAPLAN_2020_ND.predict(tab.N, tab.D) * np.exp(0.003 * rng.standard_normal(len(tab)))
    big = tab.N * tab.D >= 1e9 * 1e11
    rec = fit_kaplan(tab[~big], bootstrap=20)
    p = predict(rec, tab[big])
    assert p.summary["loss"]["max_abs_rel_error"] < 0.02 and p.df.extrapolation_factor.iloc[0] > 1
    moe = krajewski_table(noise=0.002, seed=1)
    held = moe.N == moe.N.max()
    rec = fit_moe(moe[~held].reset_index(drop=True), bootstrap=10, top_k=8)
    p = predict(rec, moe[held].reset_index(drop=True))
    assert {"N", "D", "G"} <= set(p.df.columns) and p.summary["loss"]["max_abs_rel_error"] < 0.03
    assert p.summary["loss"]["n_extrapolated"] == held.sum() and p.conventions["n_kind"] == "active_non_embedding"
    with pytest.raises(InputError, match="'G'"):
        predict(rec, moe[held].drop(columns=["G"]))


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
    assert list(p.df.columns) == ["task", "loss", "predicted", "acc_lo", "acc_hi", "measured", "rel_error", "inside",
                                  "extrapolation_factor"]
    assert p.summary["acc"]["coverage"] >= 0.85
    assert p.summary["acc"]["n_extrapolated"] == 2  # each task's loss 4.0, beyond the fitted 2.0-3.95
    p = predict(fit, pd.DataFrame({"loss": [1.5, 3.0], "task": ["a", "a"]}))
    assert p.df.extrapolation_factor.tolist() == pytest.approx([2.0 / 1.5, 1.0], rel=0.05)
    assert p.df.measured.isna().all()
    with pytest.raises(InputError, match="no task of the data is in the accuracy fit"):
        predict(fit, pd.DataFrame({"loss": [3.0], "acc": [0.5], "task": ["zzz"]}))


def test_batch_lr_optima_against_the_law(tmp_path):
    sweep = batch_lr_sweep(budgets=(1e15, 1e16, 1e17, 1e18), noise=0.0005, seed=5)
    rec = fit_batch_lr(sweep[sweep.flops < 1e18], bootstrap=20)
    p = predict(rec, sweep[sweep.flops >= 1e18].reset_index(drop=True))
    assert len(p.df) == 1 and p.quantities == ["lr", "batch_tokens"]
    cols = ["predicted_lr", "lr_lo", "lr_hi", "measured_lr", "rel_error_lr", "inside_lr",
            "predicted_batch_tokens", "batch_tokens_lo", "batch_tokens_hi", "measured_batch_tokens", "rel_error_batch_tokens",
            "inside_batch_tokens"]
    assert set(cols) <= set(p.df.columns) and p.df.columns[-1] == "extrapolation_factor"
    lr0, b0 = (float(v) for v in rec.law().predict(C=1e18))
    assert p.df.predicted_lr[0] == pytest.approx(lr0) and p.df.predicted_batch_tokens[0] == pytest.approx(b0)
    # the held-out budget's best run sits at the true optimum (0.3118 C^-0.125); the law, from the 3 smaller
    # budgets, within 10%
    assert p.df.measured_lr[0] == pytest.approx(0.3118 * 1e18 ** -0.125, rel=1e-6) and abs(p.df.rel_error_lr[0]) < 0.1
    assert p.df.inside_lr[0] and p.df.inside_batch_tokens[0] and p.df.extrapolation_factor[0] == pytest.approx(10)
    # plain points: predictions only
    p = predict(rec, pd.DataFrame({"N": [1e8], "D": [2e10]}))
    assert p.df.predicted_lr[0] == pytest.approx(float(rec.law().predict(C=6 * 1e8 * 2e10)[0]))
    assert p.df.measured_lr.isna().all()
    two = fit_batch_lr(batch_lr_sweep(budgets=(1e15, 1e16), noise=0.0))
    with pytest.raises(InputError, match="per-group optima only"):
        predict(two, sweep)


def test_run_directories_are_read_in_the_records_n_kind(tmp_path):
    from scaling.synthetic import write_run_tree

    df = chinchilla_table(budgets=(1e17, 1e18, 1e19), n_per_budget=5, noise=0.002)
    write_run_tree(tmp_path / "runs", df)  # non_embedding_params = 0.8 N in every summary.json
    rec = fit_chinchilla(tmp_path / "runs", n_kind="non_embedding", top_k=8)
    p = predict(rec, tmp_path / "runs")
    assert p.conventions["n_kind"] == "non_embedding"
    assert "non_embedding_params from summary.json" in p.conventions["n_source"]
    assert sorted(p.df.N) == pytest.approx(sorted(0.8 * df.N)) and "run" in p.df.columns
    assert p.summary["loss"]["n_measured"] == len(df) and p.summary["loss"]["max_abs_rel_error"] < 0.01
