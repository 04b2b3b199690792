"""`scalelab study next`'s forecast after the proposed runs: a refit (simulated losses, the law refitted
and bootstrapped) when the fitted runs are at hand, the Fisher update otherwise, and the output says
which; a data-constrained fit designs with its own law."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scaling.fits.chinchilla.approaches import fit_chinchilla
from scaling.synthetic.runs import TRUE_DATA_CONSTRAINED, chinchilla_table
from tests.helpers import scalelab

ARGS = ("--compute", "1e20", "--budget-flops", "1e19", "--max-runs", "4")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    d = tmp_path_factory.mktemp("forecast")
    table = d / "runs.csv"
    chinchilla_table(budgets=(1e17, 3e17, 1e18), noise=0.01).to_csv(table, index=False)
    rec = d / "a3.json"
    fit_chinchilla(table, bootstrap=12, top_k=8).save(rec)  # the forecast: 12 resamples a future
    return table, rec


def test_study_next_prints_both_intervals_and_the_refit_forecast(study):
    table, rec = study
    r = scalelab("study", "next", rec, *ARGS, "--forecast-draws", "1")  # the record's source is the table
    assert r.returncode == 0, r.stderr
    assert "today" in r.stdout and "after the proposed runs (forecast)" in r.stdout
    assert "forecast: refit (1 simulated future:" in r.stdout and "the Fisher update that chose the runs" in r.stdout


def test_without_the_fitted_runs_it_prints_the_fisher_forecast_and_says_why(study, tmp_path):
    table, rec = study
    moved = tmp_path / "a3.json"
    moved.write_text(rec.read_text().replace(str(table), str(tmp_path / "gone.csv")))
    r = scalelab("study", "next", moved, *ARGS)
    assert r.returncode == 0, r.stderr
    assert "forecast: Fisher update" in r.stdout and "give them with --runs" in r.stdout
    r = scalelab("study", "next", moved, *ARGS, "--runs", table, "--forecast-draws", "1", "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    f = p["after"]["forecast"]
    assert p["forecast_method"] == f["method"] == "refit" and f["futures"] == 1 and f["resamples"] == 12
    assert p["after"]["width_ratio"] == f["width_ratio_refit"] != f["width_ratio_fisher"]
    assert 0 < f["width_ratio_refit"]["N_opt"] <= 1.5 and 0 < f["width_ratio_refit"]["loss"] <= 1.5
    assert 0 <= f["no_optimum_share"]["today"] <= 1 and 0 <= f["no_optimum_share"]["after"] <= 1
    lo, hi = p["today"]["N_opt_interval"]
    alo, ahi = p["after"]["N_opt_interval"]
    assert lo < p["today"]["N_opt"] < hi and alo < p["today"]["N_opt"] < ahi
    other = tmp_path / "other.csv"
    chinchilla_table(budgets=(1e17, 3e17), noise=0.01, seed=5).to_csv(other, index=False)
    r = scalelab("study", "next", moved, *ARGS, "--runs", other)
    assert r.returncode == 0 and "not the ones the record was fitted on" in r.stdout
    r = scalelab("study", "next", rec, *ARGS, "--forecast-draws", "0")
    assert "forecast: Fisher update" in r.stdout and "--forecast-draws 0" in r.stdout
    r = scalelab("study", "next", rec, *ARGS, "--forecast-draws", "-1")
    assert r.returncode == 2 and "--forecast-draws must be >= 0" in r.stderr


def test_a_data_constrained_fit_designs_with_its_own_law(tmp_path):
    """Every run draws from 3e9 unique tokens: the design knows what repeating them costs (it scores runs
    with R_D*), so it proposes runs beyond one epoch, and it asks for the unique tokens when the runs
    do not state one data set."""
    rng = np.random.default_rng(0)
    df = chinchilla_table(TRUE_DATA_CONSTRAINED, budgets=(1e17, 3e17, 1e18), noise=0.01)
    df["U"] = np.minimum(df.D, 3e9)
    df["loss"] = TRUE_DATA_CONSTRAINED.predict(df.N, df.D, U=df.U) * np.exp(0.01 * rng.standard_normal(len(df)))
    rec = tmp_path / "dc.json"
    fit_chinchilla(df, law="data-constrained", terms="data", bootstrap=12, top_k=8).save(rec)
    args = ("study", "next", rec, "--compute", "1e20", "--budget-flops", "1.8e19", "--max-runs", "9")
    r = scalelab(*args)
    assert r.returncode == 2 and "--unique-tokens" in r.stderr
    r = scalelab(*args, "--unique-tokens", "3e9", "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert any("designed for its optimum with 3e+09 unique tokens" in n for n in p["notes"])
    assert any(x["D"] > 3e9 for x in p["runs"])  # repeated data is informative about R_D*
    assert p["after"]["forecast"]["method"] == "fisher"
    assert any(n.startswith("screen: fisher (") for n in p["notes"])
    r = scalelab(*args, "--unique-tokens", "3e9", "--screen", "refit")  # the record keeps no source: no runs
    assert r.returncode == 2 and "--screen refit refits the law on the fitted runs" in r.stderr


@pytest.mark.slow  # ~40 s of CPU: 4 batches x 11 refits of the data-constrained law, and the fit's bootstrap
@pytest.mark.timeout(900)
def test_the_refit_screen_chooses_a_data_constrained_fits_runs_and_says_how(tmp_path):
    """--screen refit forecasts a few batches by refitting the data-constrained law on their simulated
    losses and says which it chose and how long it took; it needs the fitted runs, and says so."""
    rng = np.random.default_rng(0)
    df = chinchilla_table(TRUE_DATA_CONSTRAINED, budgets=(1e17, 3e17, 1e18), noise=0.01)
    df["U"] = np.minimum(df.D, 3e9)
    df["loss"] = TRUE_DATA_CONSTRAINED.predict(df.N, df.D, U=df.U) * np.exp(0.01 * rng.standard_normal(len(df)))
    table, rec = tmp_path / "dc.csv", tmp_path / "dc.json"
    df.to_csv(table, index=False)
    fit_chinchilla(table, law="data-constrained", terms="data", bootstrap=10, top_k=8).save(rec)
    args = ("study", "next", rec, "--compute", "1e20", "--budget-flops", "1.8e19", "--max-runs", "3")
    # one simulated future of 10 resamples per batch: the choice's mechanics, not its quality (benchmarks/)
    r = scalelab(
        *args, "--unique-tokens", "3e9", "--screen", "refit", "--target", "n-opt", "--forecast-draws", "1", "--json"
    )
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert p["screen"] == "refit" and p["after"]["forecast"]["method"] == "refit"
    note = next(n for n in p["notes"] if n.startswith("screen: refit chose the "))
    assert note.endswith(" s)") and "of today's width" in note
    assert 0 < p["spent_flops"] <= 1.8e19 and 1 <= len(p["runs"]) <= 3


def test_max_epochs_caps_the_repeats_and_a_data_constrained_default_brackets_the_target(tmp_path):
    """A menu of runs at 1-12 epochs of 3e9 unique tokens: --max-epochs E leaves out those beyond E and
    says how many; a data-constrained law's default lets the runs repeat the data up to twice as often as
    its optimum at the target (here more than 4 epochs: the 1e20 optimum repeats its 3e9 tokens > 2x),
    and a cap that is not a positive number is refused before any work."""
    rng = np.random.default_rng(0)
    df = chinchilla_table(TRUE_DATA_CONSTRAINED, budgets=(1e17, 3e17, 1e18), noise=0.01)
    df["U"] = np.minimum(df.D, 3e9)
    df["loss"] = TRUE_DATA_CONSTRAINED.predict(df.N, df.D, U=df.U) * np.exp(0.01 * rng.standard_normal(len(df)))
    rec, menu = tmp_path / "dc.json", tmp_path / "menu.csv"
    fit_chinchilla(df, law="data-constrained", terms="data", bootstrap=12, top_k=8).save(rec)
    epochs = np.array([1, 2, 3, 5, 7, 9, 12], float)
    rows = [(n, e * 3e9) for n in (2e7, 5e7, 1e8, 3e8) for e in epochs]
    menu.write_text("N,D\n" + "".join(f"{n:.6g},{d:.6g}\n" for n, d in rows))
    args = ("study", "next", rec, "--compute", "1e20", "--budget-flops", "1e21", "--max-runs", "28")
    args += ("--unique-tokens", "3e9", "--candidates", menu, "--forecast-draws", "0", "--json")

    r = scalelab(*args, "--max-epochs", "6")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    left = "left out 12 candidate(s) with more than 6 epochs of the fitted runs' 3e+09 unique tokens (--max-epochs)"
    assert left in p["notes"]
    assert p["runs"] and all(x["D"] <= 6 * 3e9 for x in p["runs"])

    r = scalelab(*args)
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    note = next(n for n in p["notes"] if n.startswith("left out "))
    assert note.endswith("(2x the epochs of the optimum at the target; --max-epochs)")
    cap = float(note.split("more than ")[1].split(" epochs")[0])
    assert cap > 4 and all(x["D"] <= cap * 3e9 for x in p["runs"])
    assert any(x["D"] > 4 * 3e9 for x in p["runs"])  # beyond the old 4-epoch cap

    for bad in ("0", "-2", "nan"):
        r = scalelab(*args, "--max-epochs", bad)
        assert r.returncode == 2 and f"--max-epochs must be a positive number of epochs (got {float(bad)})" in r.stderr
