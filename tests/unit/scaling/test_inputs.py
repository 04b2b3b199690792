"""Inputs: run-directory trees, CSV/Parquet column mapping, and bad-input errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from scaling import InputError, fit_chinchilla
from scaling.data.columns import parse_columns
from scaling.data.inputs import ROLES, load, read_run_dirs
from scaling.synthetic.runs import chinchilla_table, write_run_tree


def test_run_tree_reader_skips_broken_runs_with_warnings(tmp_path):
    reader = read_run_dirs
    df = chinchilla_table(budgets=(1e17, 1e18), n_per_budget=4, noise=0.0)
    write_run_tree(tmp_path, df)
    out, warnings = reader(tmp_path)
    assert len(out) == 8
    assert np.allclose(np.sort(out["loss"]), np.sort(df["loss"]))  # final_val_loss preferred
    assert set(out["sweep"]) == {"synthetic-isoflop"}
    text = " | ".join(warnings)
    assert "broken-summary" in text and "status 'failed'" in text
    assert "no summary.json yet" in text or "status 'pending'" in text  # the half-written run
    ne, _ = reader(tmp_path, n_kind="non_embedding")
    assert np.allclose(np.sort(ne["N"]), np.sort(0.8 * out["N"]))


def test_run_tree_loss_falls_back_to_final_loss(tmp_path):
    reader = read_run_dirs
    run = tmp_path / "sweep" / "r0"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"status": "done", "params": 1e6, "tokens": 2e7, "final_loss": 3.5}))
    (run / "config.yaml").write_text("model: {seq_len: 128}\noptim: {lr: 0.01}\ntrain: {global_batch_size: 8}\n")
    out, _ = reader(tmp_path)
    assert out.loc[0, "loss"] == 3.5 and out.loc[0, "lr"] == 0.01 and out.loc[0, "batch_tokens"] == 1024


def test_run_tree_missing_keys_warns_and_empty_tree_errors(tmp_path):
    run = tmp_path / "s" / "r"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"status": "done", "params": 1e6}))
    with pytest.raises(InputError, match="no finished runs"):
        read_run_dirs(tmp_path)


def test_fit_on_run_tree_records_n_kind(tmp_path):
    df = chinchilla_table(budgets=(1e17, 1e18, 1e19), n_per_budget=5, noise=0.002)
    write_run_tree(tmp_path, df)
    rec = fit_chinchilla(tmp_path, top_k=8)
    assert rec["n_points"] == 15 and rec["n_kind"].startswith("total")
    assert any("failed" in w for w in rec.warnings)
    rec2 = fit_chinchilla(tmp_path, top_k=8, n_kind="non_embedding")
    assert rec2["n_kind"].startswith("non_embedding")


def test_csv_and_parquet_with_aliases_and_col_mapping(tmp_path):
    df = chinchilla_table(noise=0.0, n_per_budget=4)
    raw = pd.DataFrame({"Model Size": df.N, "Training FLOP": df.flops, "my_loss": df.loss})
    raw.to_csv(tmp_path / "a.csv", index=False)
    ds = load(tmp_path / "a.csv", parse_columns(["loss=my_loss"], ROLES))
    assert ds.columns["N"] == "Model Size" and ds.columns["D"] == "flops/(6N)"
    assert np.allclose(ds.df.D, df.D)
    raw.to_parquet(tmp_path / "a.parquet")
    ds2 = load(tmp_path / "a.parquet", {"loss": "my_loss"})
    assert np.allclose(ds2.df.loss, df.loss)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d.assign(loss=np.where(d.index == 3, np.nan, d.loss)), r"'loss' \(loss\) has 1 NaN"),
        (lambda d: d.assign(N=np.where(d.index == 2, -5.0, d.N)), r"'N' \(N\) has 1 non-positive value"),
        (lambda d: d.drop(columns=["loss"]), r"missing column for 'loss'"),
        (lambda d: d.head(4), r"too few points: 4"),
        (lambda d: d.assign(loss="x"), r"non-numeric"),
    ],
)
def test_bad_inputs_name_the_problem(mutate, match):
    df = chinchilla_table(noise=0.0, n_per_budget=4)[["N", "D", "loss"]]
    with pytest.raises(InputError, match=match):
        fit_chinchilla(mutate(df))


def test_bad_options():
    df = chinchilla_table(noise=0.0, n_per_budget=4)
    with pytest.raises(InputError, match="approach"):
        fit_chinchilla(df, approach=4)
    with pytest.raises(InputError, match="role"):
        parse_columns(["X=foo"], ROLES)
    with pytest.raises(InputError, match="no column"):
        load(df, {"N": "nope"})
    with pytest.raises(InputError, match="drop all"):
        fit_chinchilla(df, drop_highest_k=100)


def test_training_curves_for_approach1(tmp_path):
    from scaling.data.inputs import read_curves
    from scaling.synthetic.runs import TRUE_CHINCHILLA

    write_run_tree(tmp_path, chinchilla_table(budgets=(1e15, 1e16, 1e17, 1e18), n_per_budget=7, noise=0.0))
    curves, warnings = read_curves(tmp_path)
    assert len(curves) == 28 * 18  # 20 records per run, first 10% skipped
    final = read_run_dirs(tmp_path)[0].set_index("run")["D"]
    last = curves.groupby("run")["D"].max()
    assert np.allclose(last[final.index], final)
    rec = fit_chinchilla(load(tmp_path, curves=True), approach=1)
    assert rec.params["a"] == pytest.approx(TRUE_CHINCHILLA.a, abs=0.03)
    assert not any("one final loss per run" in w for w in rec.warnings)
    csv = tmp_path / "t.csv"
    chinchilla_table().to_csv(csv, index=False)
    with pytest.raises(InputError, match="run-directory"):
        load(csv, curves=True)
