"""Approach 2's checks and weighting, and bootstraps that resample runs and never hide bugs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scaling import FitError, fit_batch_lr, fit_chinchilla
from scaling.core import bootstrap as bs
from scaling.synthetic.runs import TRUE_CHINCHILLA, batch_lr_sweep, chinchilla_table, write_run_tree


def isoflop(budgets, sizes_per_budget, spread=8.0, noise=0.0, shift=1.0, seed=0):
    """IsoFLOP table with `sizes_per_budget` sizes spanning x1/spread..x spread around `shift` x N_opt."""
    rng = np.random.default_rng(seed)
    rows = []
    for C in budgets:
        n_opt, _ = TRUE_CHINCHILLA.compute_optimal(C)
        for n in shift * n_opt * np.geomspace(1 / spread, spread, sizes_per_budget):
            d = C / (6 * n)
            rows.append(
                {
                    "N": n,
                    "D": d,
                    "flops": C,
                    "loss": float(TRUE_CHINCHILLA.predict(n, d) * np.exp(noise * rng.standard_normal())),
                }
            )
    return pd.DataFrame(rows)


def test_few_sizes_and_edge_minima_are_warned():
    rec = fit_chinchilla(isoflop((1e17, 1e18, 1e19), 3), approach=2, frontier_weights="inverse-variance")
    text = " | ".join(rec.warnings)
    assert "3 budget(s) have fewer than 5 model sizes" in text
    assert "unweighted" in text  # 3 points per parabola leave no residual to weight by
    assert "unweighted" not in " | ".join(
        fit_chinchilla(isoflop((1e17, 1e18, 1e19), 3), approach=2).warnings
    )  # OLS: nothing to say
    # a budget whose best run is its smallest model (the parabola's vertex still falls inside)
    df = isoflop((1e17, 1e18, 1e19), 5)
    edge_budget = pd.DataFrame(
        {"N": 1e7 * np.array([1, 2, 4, 8, 16]), "flops": 1e20, "loss": [2.000, 2.002, 2.000, 2.010, 2.040]}
    )
    edge_budget["D"] = 1e20 / (6 * edge_budget.N)
    rec = fit_chinchilla(pd.concat([df, edge_budget], ignore_index=True), approach=2)
    edge = [w for w in rec.warnings if "best run at the smallest or largest size" in w]
    assert len(edge) == 1 and "C~1e+20: N=1e+07" in edge[0]
    assert [b["edge"] for b in rec["diagnostics"]["budgets"]] == [False, False, False, True]


def test_regression_is_weighted_by_vertex_precision():
    df = pd.concat(
        [isoflop((1e17, 1e19), 7, spread=8, noise=0.002, seed=1), isoflop((1e18,), 7, spread=1.5, noise=0.002, seed=2)]
    )
    rec = fit_chinchilla(df, approach=2, frontier_weights="inverse-variance")
    b = {round(np.log10(r["C"])): r for r in rec["diagnostics"]["budgets"]}
    # the narrow budget (sizes x1/1.5..x1.5) locates its vertex far less precisely
    assert b[18]["log_N_opt_se"] > 2 * b[17]["log_N_opt_se"]
    w = np.array([1 / b[k]["log_N_opt_se"] ** 2 for k in (17, 18, 19)])
    x, y = np.log([b[k]["C"] for k in (17, 18, 19)]), np.log([b[k]["N_opt"] for k in (17, 18, 19)])
    A = np.column_stack([np.ones(3), x]) * np.sqrt(w)[:, None]
    coef, *_ = np.linalg.lstsq(A, y * np.sqrt(w), rcond=None)
    assert rec["params"]["a"] == pytest.approx(coef[1], rel=1e-9)
    assert (
        "weighted by 1/var(log N_opt)" in rec["settings"]["method"]
        and rec["settings"]["frontier_weights"] == "inverse-variance"
    )


def test_bootstrap_failures_are_explained():
    # budgets with the optimum near the edge: some resamples lose their interior minimum
    df = isoflop((1e17, 1e18), 5, spread=4, shift=2.5, noise=0.01, seed=3)
    rec = fit_chinchilla(df, approach=2, bootstrap=40)
    boot = rec["bootstrap"]
    assert boot["failed"] > 0 and sum(boot["failure_reasons"].values()) == boot["failed"]
    assert any("interior minimum" in k for k in boot["failure_reasons"])
    assert any("bootstrap resamples gave no frontier fit" in w and "interior minimum" in w for w in rec.warnings)


def test_a_programming_error_in_a_resample_fails_loudly():
    idx = [np.arange(3)] * 3

    def buggy(i):
        return {"x": undefined_name}  # noqa: F821

    with pytest.raises(NameError):
        bs.run_bootstrap(buggy, idx)
    reasons = {}

    def degenerate(i):
        raise FitError("no minimum")

    samples, failed = bs.run_bootstrap(degenerate, idx, reasons)
    assert failed == 3 and reasons == {"no minimum": 3} and samples == {}


def test_curves_bootstrap_resamples_whole_runs(tmp_path):
    labels = np.repeat(np.arange(5), 4)
    for idx in bs.resample_clusters(labels, 20, seed=0):
        counts = np.bincount(labels[idx], minlength=5)
        assert set(counts) <= {0, 4, 8, 12, 16, 20}  # every drawn run brings all its points
    write_run_tree(tmp_path, chinchilla_table(budgets=(1e15, 1e16, 1e17), n_per_budget=5, noise=0.0))
    from scaling.data.inputs import load

    rec = fit_chinchilla(load(tmp_path, curves=True), approach=1, bootstrap=10)
    assert rec["settings"]["curves"] and rec["bootstrap"]["method"].startswith(
        "resample runs (all points of a run together)"
    )


def test_batch_lr_intercept_is_centred():
    rec = fit_batch_lr(batch_lr_sweep(budgets=(1e15, 1e16, 1e17), noise=0.002), bootstrap=40)
    p, iv = rec["params"], rec["intervals"]
    c0 = rec["settings"]["center_C"]
    assert c0 == pytest.approx(1e16, rel=1e-6)  # geometric mean of the budgets
    assert p["lr_at_center"] == pytest.approx(p["lr_coef"] * c0 ** p["lr_exp_C"], rel=1e-9)
    width = lambda k: np.log(iv[k][1] / iv[k][0])  # noqa: E731
    # the intercept where the sweep measured is tight; the one at C = 1 carries the extrapolation
    assert width("lr_at_center") < 0.2 * width("lr_coef")


def test_quadratic_optimum_inside_the_grid_is_not_an_edge():
    # the truth lies between grid points, nearest the smallest lr: the best *run* is on the edge,
    # the fitted surface's vertex (the optimum used) is not
    df = batch_lr_sweep(budgets=(1e15, 1e16), lr_mults=(0.6, 1.8, 5.4), bs_mults=(0.5, 1, 2), noise=0.0)
    rec = fit_batch_lr(df, optimum="quadratic")
    groups = rec["diagnostics"]["groups"]
    assert all(g["optimum"] == "quadratic" and g["best_run_on_grid_edge"] and not g["lr_on_grid_edge"] for g in groups)
    assert not any("on the edge" in w for w in rec.warnings)
    assert fit_batch_lr(df, optimum="best")["warnings"] and any(
        "on the edge" in w for w in fit_batch_lr(df)["warnings"]
    )
