"""`--law data-constrained --terms data` (Muennighoff et al. 2023's data term, N' = N): the law,
recovery of known parameters, the bias of the plain law on repeated data, records, and bad input.
The complete law (the default, R_N_star fitted too): tests/test_data_constrained_full.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scaling import FitRecord, InputError, fit_chinchilla
from scaling.laws.loss import MUENNIGHOFF_2023, ChinchillaLaw, DataConstrainedLaw
from scaling.synthetic.runs import TRUE_DATA_CONSTRAINED, data_constrained_table

TRUTH = {k: getattr(TRUE_DATA_CONSTRAINED, k) for k in ("E", "A", "B", "alpha", "beta", "R_D_star")}


def test_law_matches_the_papers_published_predictions():
    # datablations README (C4 fit, with the N' term): Figure 1 (right) models
    assert MUENNIGHOFF_2023.predict(6.34e9, 242e9, 25e9) == pytest.approx(2.2256440889984477, rel=1e-12)
    assert MUENNIGHOFF_2023.predict(8.67e9, 178e9, 25e9) == pytest.approx(2.2269634075087867, rel=1e-12)
    law = TRUE_DATA_CONSTRAINED
    plain = ChinchillaLaw(**{k: TRUTH[k] for k in ("E", "A", "B", "alpha", "beta")})
    N, D = np.array([1e8, 1e9]), np.array([2e9, 2e10])
    assert np.allclose(law.predict(N, D), plain.predict(N, D))  # U unknown: the Chinchilla law
    assert np.allclose(law.predict(N, D, U=D), plain.predict(N, D))  # one epoch
    assert np.allclose(law.predict(N, D, U=3 * D), plain.predict(N, D))  # fewer tokens than unique data: no repetition
    # 20 epochs are worth U (1 + R* (1 - exp(-19/R*))) ~ 11.9 U of fresh data, not 20 U
    assert law.effective_data(20e9, 1e9) == pytest.approx(1e9 * (1 + 15.4 * (1 - np.exp(-19 / 15.4))))
    assert law.predict(1e8, 20e9, U=1e9) > plain.predict(1e8, 20e9)


def test_noise_free_recovery_is_exact():
    rec = fit_chinchilla(data_constrained_table(noise=0.0), law="data-constrained", terms="data", top_k=8)
    for k, v in TRUTH.items():
        assert rec.params[k] == pytest.approx(v, rel=1e-5), k
    assert rec["law"] == "chinchilla" and rec["settings"]["law"] == "data-constrained" and rec["objective"] < 1e-15
    assert not rec.warnings


@pytest.mark.parametrize("objective", ["huber", "mle"])
def test_small_noise_recovery(objective):
    """0.1% log-normal noise, repetition up to 20 epochs: R_D_star within 5%, exponents within 0.005."""
    df = data_constrained_table(noise=0.001, seed=0)
    assert (df.D / df.U).max() == 20
    rec = fit_chinchilla(df, law="data-constrained", terms="data", objective=objective, top_k=8)
    p = rec.params
    assert p["R_D_star"] == pytest.approx(15.4, rel=0.05)
    assert abs(p["alpha"] - 0.35) < 0.005 and abs(p["beta"] - 0.37) < 0.005 and abs(p["E"] - 1.8) < 0.01
    assert rec["settings"]["objective"] == objective and ("sigma" in p) == (objective == "mle")


def test_plain_law_is_biased_on_repeated_data_and_data_constrained_is_not():
    df = data_constrained_table(noise=0.0)
    plain = fit_chinchilla(df, top_k=8)
    dc = fit_chinchilla(df, law="data-constrained", terms="data", top_k=8)
    many = (df.D / df.U >= 16).to_numpy()
    obs = df.loss.to_numpy()
    err_plain = plain.law().predict(df.N, df.D) / obs - 1
    err_dc = dc.law().predict(df.N, df.D, U=df.U) / obs - 1
    # the plain law, told only D, thinks 16-20 epochs are as good as fresh tokens ...
    assert np.mean(err_plain[many]) < -0.004 and plain["objective"] > 1e-4
    assert abs(plain.params["A"] / 480 - 1) > 0.1 and abs(plain.params["B"] / 2100 - 1) > 0.1
    # ... the data-constrained law fits every run
    assert np.max(np.abs(err_dc)) < 1e-6


def test_record_roundtrip_and_law_object(tmp_path):
    rec = fit_chinchilla(
        data_constrained_table(noise=0.002, unique=(1e9,), epochs=(1, 4, 16)),
        law="data-constrained",
        terms="data",
        top_k=8,
        bootstrap=8,
        seed=2,
    )
    back = FitRecord.load(rec.save(tmp_path / "dc.json"))
    law = back.law()
    assert isinstance(law, DataConstrainedLaw) and law.R_D_star == pytest.approx(rec.params["R_D_star"])
    assert law.predict(1e8, 1e10) == pytest.approx(
        ChinchillaLaw(**{k: rec.params[k] for k in ("E", "A", "B", "alpha", "beta")}).predict(1e8, 1e10)
    )
    assert set(back["bootstrap"]["samples"]) == set(TRUTH) and "R_D_star" in back.intervals
    assert back["diagnostics"]["epochs_max"] == 16 and "unique data" in back["settings"]["derived_assumes"]
    assert back["settings"]["terms"] == "data" and "R_N_star" not in back.params


def test_bad_unique_tokens_are_input_errors():
    df = data_constrained_table(noise=0.0)
    # U is the unique data a run could draw from: runs shorter than one epoch repeat nothing
    with pytest.raises(InputError, match="no run repeats its data"):
        fit_chinchilla(df.assign(U=df.D * 2), law="data-constrained", top_k=4)
    with pytest.raises(InputError, match="NaN"):
        fit_chinchilla(df.assign(U=df.U.where(df.index != 3)), law="data-constrained", top_k=4)
    with pytest.raises(InputError, match="R_D_star is not identified"):
        fit_chinchilla(df.assign(U=df.D), law="data-constrained", top_k=4)
    with pytest.raises(InputError, match="approach 3 only"):
        fit_chinchilla(df, law="data-constrained", approach=2)


def test_runs_shorter_than_an_epoch_count_as_fresh_data():
    df = data_constrained_table(noise=0.0)
    fresh = df[df.D <= df.U]
    # a training split larger than what a run trained on: that run saw D unique tokens, none twice
    mixed = pd.concat([df, fresh.assign(U=fresh.D * 5)], ignore_index=True)
    rec = fit_chinchilla(mixed, law="data-constrained", terms="data", top_k=8)
    assert rec.params["R_D_star"] == pytest.approx(15.4, rel=0.05)
