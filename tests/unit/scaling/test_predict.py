"""`scalelab predict FIT.json DATA`: a fit record from a known law predicts held-out points within its
prediction interval, with their relative error, coverage and extrapolation flagged; every law it
serves (chinchilla approach 3, data-constrained, kaplan, moe, task-loss, accuracy, batch-lr); exit 2
when the record and the data do not match."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scaling import fit_batch_lr, fit_chinchilla, fit_kaplan
from scaling.core.errors import InputError
from scaling.fits.moe.fit import fit_moe
from scaling.laws.loss import KAPLAN_2020_ND, MUENNIGHOFF_2023
from scaling.planning.predict import predict
from scaling.synthetic.moe import krajewski_table
from scaling.synthetic.runs import batch_lr_sweep, chinchilla_table, data_constrained_table


def test_data_constrained_applies_unique_tokens():
    df = data_constrained_table(
        MUENNIGHOFF_2023,
        noise=0.003,
        seed=3,
        unique=(3e8, 1e9, 3e9),
        models=(3e7, 1e8, 3e8, 1e9),
        epochs=(1, 2, 4, 8, 16, 32),
    )
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
    rec = fit_kaplan(tab[~big], bootstrap=8)
    p = predict(rec, tab[big])
    assert p.summary["loss"]["max_abs_rel_error"] < 0.02 and p.df.extrapolation_factor.iloc[0] > 1
    moe = krajewski_table(noise=0.002, seed=1)
    held = moe.N == moe.N.max()
    rec = fit_moe(moe[~held].reset_index(drop=True), bootstrap=4, top_k=8)
    p = predict(rec, moe[held].reset_index(drop=True))
    assert {"N", "D", "G"} <= set(p.df.columns) and p.summary["loss"]["max_abs_rel_error"] < 0.03
    assert p.summary["loss"]["n_extrapolated"] == held.sum() and p.conventions["n_kind"] == "active_non_embedding"
    with pytest.raises(InputError, match="'G'"):
        predict(rec, moe[held].drop(columns=["G"]))


def test_batch_lr_optima_against_the_law(tmp_path):
    sweep = batch_lr_sweep(budgets=(1e15, 1e16, 1e17, 1e18), noise=0.0005, seed=5)
    rec = fit_batch_lr(sweep[sweep.flops < 1e18], bootstrap=20)
    p = predict(rec, sweep[sweep.flops >= 1e18].reset_index(drop=True))
    assert len(p.df) == 1 and p.quantities == ["lr", "batch_tokens"]
    cols = [
        "predicted_lr",
        "lr_lo",
        "lr_hi",
        "measured_lr",
        "rel_error_lr",
        "inside_lr",
        "predicted_batch_tokens",
        "batch_tokens_lo",
        "batch_tokens_hi",
        "measured_batch_tokens",
        "rel_error_batch_tokens",
        "inside_batch_tokens",
    ]
    assert set(cols) <= set(p.df.columns) and p.df.columns[-1] == "extrapolation_factor"
    lr0, b0 = (float(v) for v in rec.law().predict(C=1e18))
    assert p.df.predicted_lr[0] == pytest.approx(lr0) and p.df.predicted_batch_tokens[0] == pytest.approx(b0)
    # the held-out budget's best run sits at the true optimum (0.3118 C^-0.125); the law, from the 3 smaller
    # budgets, within 10%
    assert p.df.measured_lr[0] == pytest.approx(0.3118 * 1e18**-0.125, rel=1e-6) and abs(p.df.rel_error_lr[0]) < 0.1
    assert p.df.inside_lr[0] and p.df.inside_batch_tokens[0] and p.df.extrapolation_factor[0] == pytest.approx(10)
    # plain points: predictions only
    p = predict(rec, pd.DataFrame({"N": [1e8], "D": [2e10]}))
    assert p.df.predicted_lr[0] == pytest.approx(float(rec.law().predict(C=6 * 1e8 * 2e10)[0]))
    assert p.df.measured_lr.isna().all()
    two = fit_batch_lr(batch_lr_sweep(budgets=(1e15, 1e16), noise=0.0))
    with pytest.raises(InputError, match="per-group optima only"):
        predict(two, sweep)


def test_run_directories_are_read_in_the_records_n_kind(tmp_path):
    from scaling.synthetic.runs import write_run_tree

    df = chinchilla_table(budgets=(1e17, 1e18, 1e19), n_per_budget=5, noise=0.002)
    write_run_tree(tmp_path / "runs", df)  # non_embedding_params = 0.8 N in every summary.json
    rec = fit_chinchilla(tmp_path / "runs", n_kind="non_embedding", top_k=8)
    p = predict(rec, tmp_path / "runs")
    assert p.conventions["n_kind"] == "non_embedding"
    assert "non_embedding_params from summary.json" in p.conventions["n_source"]
    assert sorted(p.df.N) == pytest.approx(sorted(0.8 * df.N)) and "run" in p.df.columns
    assert p.summary["loss"]["n_measured"] == len(df) and p.summary["loss"]["max_abs_rel_error"] < 0.01
