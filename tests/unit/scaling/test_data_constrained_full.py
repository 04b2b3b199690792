"""Muennighoff et al. 2023's complete data-constrained law (`--law data-constrained`, default
`--terms data+params`): R_D_star and R_N_star fitted, recovery of the paper's constants, the
frontier and plan with few unique tokens (the paper's Figure 3 and its authors' worked example)."""

from __future__ import annotations

import numpy as np
import pytest

from launch.sweep.expand import expand
from launch.sweep.spec import load_spec
from scaling import fit_chinchilla, make_plan
from scaling.fits.chinchilla.data_constrained import Objective
from scaling.laws.loss import MUENNIGHOFF_2023 as PAPER
from scaling.synthetic.runs import data_constrained_table
from tests.helpers import REPO

PAPER_PARAMS = {k: getattr(PAPER, k) for k in ("E", "A", "B", "alpha", "beta", "R_D_star", "R_N_star")}


DESIGN = {"unique": (3e8, 1e9, 3e9), "models": (3e7, 1e8, 3e8, 1e9), "epochs": (1, 2, 4, 8, 16, 32)}


def table(noise=0.0, seed=0, **kw):
    """IsoFLOP runs on fresh data plus every model trained for 1-32 epochs of each unique budget, drawn from the
    paper's law."""
    return data_constrained_table(PAPER, noise=noise, seed=seed, **{**DESIGN, **kw})


def test_the_authors_worked_example_and_figure_3():
    # datablations README: from Chinchilla's 8.67B parameters / 178B tokens with 25B unique tokens,
    # the optimal allocation is "227B tokens, 9.1 epochs, 6.8B parameters"
    C = 6 * 8.67e9 * 178e9
    n, d = PAPER.compute_optimal(C, U=25e9)
    assert n == pytest.approx(6.8e9, rel=0.01) and d == pytest.approx(227e9, rel=0.01)
    assert d / 25e9 == pytest.approx(9.1, abs=0.05)
    assert PAPER.predict(n, d, 25e9) < PAPER.predict(8.67e9, 178e9, 25e9)
    # Figure 3: with few unique tokens the efficient frontier moves to fewer parameters and more epochs;
    # with plenty it is Chinchilla's
    n_fresh, _ = PAPER.compute_optimal(C)
    ratios = [PAPER.compute_optimal(C, U=u)[0] / n_fresh for u in (5e9, 25e9, 100e9, 1e13)]
    assert ratios == sorted(ratios) and ratios[0] < 0.7 and ratios[-1] == pytest.approx(1.0, rel=0.01)
    # at fixed unique data, more compute goes to epochs more than parameters: N_opt / N_fresh falls
    shares = [PAPER.compute_optimal(c, U=25e9)[0] / PAPER.compute_optimal(c)[0] for c in (1e21, 1e22, 1e23)]
    assert shares[0] > shares[1] > shares[2]


def test_gradient_is_analytic():
    df = table(noise=0.01)
    o = Objective(df.N, df.D, df.U, df.loss)
    th = np.array([6.2, 7.3, 0.6, 0.35, 0.36, np.log(15.0), np.log(5.0)])
    num = np.column_stack([(o.residuals(th + 1e-6 * e) - o.residuals(th - 1e-6 * e)) / 2e-6 for e in np.eye(7)])
    assert np.abs(o.jacobian(th) - num).max() < 1e-7
    assert o.n_excess(th) > 10  # the design has models beyond the compute-optimal N for their unique tokens


def test_noise_free_recovery_of_the_papers_constants():
    rec = fit_chinchilla(table(), law="data-constrained", top_k=8)
    for k, v in PAPER_PARAMS.items():
        assert rec.params[k] == pytest.approx(v, rel=1e-4), k
    st = rec["settings"]
    assert st["terms"] == "data+params" and "R_N_star" in st["fitted"] and "N' = U_N" in st["form"] and not rec.warnings
    assert rec["objective"] < 1e-15 and rec["diagnostics"]["n_excess_param_runs"] > 10


def test_small_noise_recovery_and_the_data_term_only_form():
    df = table(noise=0.002, seed=1)
    rec = fit_chinchilla(df, law="data-constrained", top_k=8)
    p = rec.params
    assert p["R_D_star"] == pytest.approx(15.39, rel=0.05) and p["R_N_star"] == pytest.approx(5.31, rel=0.1)
    assert abs(p["alpha"] - 0.3527) < 0.005 and abs(p["beta"] - 0.3527) < 0.005
    assert p["E"] == pytest.approx(1.869, rel=0.01)
    data_only = fit_chinchilla(df, law="data-constrained", terms="data", top_k=8)
    assert data_only["settings"]["terms"] == "data" and "R_N_star" not in data_only.params
    assert data_only["objective"] > 5 * rec["objective"]  # the excess-parameter runs are missed without N'


def test_derived_and_plan_use_the_unique_tokens():
    # one data set of 1e9 unique tokens: every run draws from it
    df = table(noise=0.0)
    df = df[df.U == 1e9].reset_index(drop=True)
    rec = fit_chinchilla(df, law="data-constrained", top_k=8, bootstrap=6, seed=0, at_compute=[1e21])
    assert rec["data"]["unique_tokens"] == 1e9 and "1e+09 unique tokens" in rec["settings"]["derived_assumes"]
    row = next(r for r in rec["derived"] if r["C"] == 1e21)
    n_u, d_u = PAPER.compute_optimal(1e21, U=1e9)
    assert row["N_opt"] == pytest.approx(n_u, rel=0.02) and row["N_opt"] < 0.7 * row["N_opt_fresh"]
    assert row["epochs_opt"] == pytest.approx(d_u / 1e9, rel=0.02)
    assert row["N_opt_interval"][0] <= row["N_opt"] <= row["N_opt_interval"][1]
    plan = make_plan([rec], 1e21, vocab_size=4096)
    dc = plan["data_constrained"]
    assert plan["N_opt"] == pytest.approx(row["N_opt"], rel=0.02) and dc["unique_tokens"] == 1e9
    assert dc["source"] == "the fitted runs' data set"
    assert dc["N_opt_fresh"] == pytest.approx(row["N_opt_fresh"], rel=0.02)
    assert plan["N_opt_interval"][0] <= plan["N_opt"] <= plan["N_opt_interval"][1]
    more = make_plan([rec], 1e21, vocab_size=4096, unique_tokens=1e12)  # plenty of data: Chinchilla's frontier
    assert more["N_opt"] == pytest.approx(row["N_opt_fresh"], rel=0.02)
    assert more["data_constrained"]["source"] == "--unique-tokens"


def test_unidentified_excess_parameters_are_said():
    # only small models on the repeated data and a fresh sweep kept below the optimum: no run has N > U_N
    df = data_constrained_table(
        PAPER, budgets=(), unique=(1e9, 3e9), models=(3e6, 1e7, 2e7), epochs=(1, 2, 4, 8, 16), noise=0.0
    )
    rec = fit_chinchilla(df, law="data-constrained", top_k=4)
    assert rec["diagnostics"]["n_excess_param_runs"] < 2
    assert any("R_N_star is not identified" in w for w in rec.warnings)


def test_the_repeated_data_sweep_spec_expands():
    # configs/sweeps/data-constrained-tiny.yaml: 3 unique-token budgets x 3 models x 3 token counts, one validation set
    plan = expand(load_spec(REPO / "configs/sweeps/data-constrained-tiny.yaml"))
    assert len(plan.runs) == 27 and {r.cfg.data.name for r in plan.runs} == {"dc-tiny", "dc-tiny-u5", "dc-tiny-u50"}
    vals = {r.cfg.data.name: r.cfg.data.val_sources[0].path for r in plan.runs}
    assert set(vals.values()) == {"corpus/gutenberg100/valid.txt.gz"}
    assert {r.cfg.data.tokenizer.vocab_size for r in plan.runs} == {512}
    assert max(r.tokens for r in plan.runs) == pytest.approx(1e6, rel=1e-3)  # whole steps of 512 tokens
