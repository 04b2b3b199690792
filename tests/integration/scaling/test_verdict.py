"""The plan's verdict (scaling.planning.verdict) and `scalelab study next` on a synthetic Chinchilla
law: small IsoFLOP sweeps whose law answers near their compute and not a million times beyond it."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import yaml

from scaling.fits.chinchilla.approaches import fit_chinchilla
from scaling.fits.record import FitRecord
from scaling.planning.plan import make_plan
from scaling.synthetic.runs import chinchilla_table
from tests.helpers import scalelab
from tests.helpers.data import data_root


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    d = tmp_path_factory.mktemp("verdict")
    df = chinchilla_table(budgets=(1e17, 3e17, 1e18), noise=0.01)
    a3 = fit_chinchilla(df, bootstrap=40, top_k=8)
    a2 = fit_chinchilla(df, approach=2, bootstrap=40)
    return a3, a2, str(a3.save(d / "a3.json")), str(a2.save(d / "a2.json"))


def test_the_verdict_states_the_intervals_and_fails_far_out(fits):
    a3, a2, *_ = fits
    near = make_plan([a3, a2], 1e19, vocab_size=4096)
    v = near["verdict"]
    assert v["status"] == "identified" and v["N_opt_span"] <= 4.0
    assert v["extrapolation_factor"] == pytest.approx(10.0)
    assert v["N_opt_interval"][0] < near["N_opt"] < v["N_opt_interval"][1]
    assert v["loss_interval"][0] < near["loss_at_optimum"] < v["loss_interval"][1]
    assert [r["approach"] for r in v["exponents"]["approaches"]] == [3, 2] and v["exponents"]["agree"]
    far = make_plan([a3, a2], 1e24, vocab_size=4096)["verdict"]
    assert far["status"] == "not identified at this budget" and far["N_opt_span"] > 4.0
    assert any("spans" in r for r in far["reasons"])
    assert any("far extrapolation" in w for w in far["warnings"])  # the warnings that explain it, grouped
    # the span is a setting
    assert make_plan([a3], 1e24, vocab_size=4096, identified_span=50.0)["verdict"]["status"] == "identified"


def test_approaches_that_disagree_make_the_law_not_identified(fits):
    a3, a2, *_ = fits
    off = FitRecord(json.loads(json.dumps(a2.to_dict())))
    off["params"]["a"] += 0.3  # approach 2 now says N_opt grows as C^0.83
    off["bootstrap"]["samples"]["a"] = [x + 0.3 for x in off["bootstrap"]["samples"]["a"]]
    v = make_plan([a3, off], 1e19, vocab_size=4096)["verdict"]
    assert v["status"] == "not identified at this budget" and not v["exponents"]["agree"]
    assert any("disagree on the compute-optimal exponent" in r for r in v["reasons"])


def test_emit_config_refuses_a_not_identified_plan_unless_forced(fits, tmp_path):
    *_, a3, a2 = fits
    out = tmp_path / "run.yaml"
    r = scalelab("plan", a3, a2, "--compute", "1e24", "--vocab-size", "4096", "--emit-config", out)
    assert r.returncode == 2 and "not identified at 1e+24 FLOPs" in r.stderr and "--force" in r.stderr
    assert not out.exists()
    r = scalelab("plan", a3, a2, "--compute", "1e24", "--vocab-size", "4096", "--emit-config", out, "--force")
    assert r.returncode == 0 and out.exists()
    assert r.stdout.startswith("compute: 1e+24") and "verdict: NOT IDENTIFIED AT THIS BUDGET" in r.stdout
    r = scalelab("plan", a3, a2, "--compute", "1e19", "--vocab-size", "4096", "--emit-config", tmp_path / "ok.yaml")
    assert r.returncode == 0 and "verdict: IDENTIFIED" in r.stdout


def test_study_next_proposes_a_sweep_the_launcher_accepts(fits, tmp_path):
    *_, a3, a2 = fits
    spec = tmp_path / "next.yaml"
    r = scalelab(
        "study",
        "next",
        a3,
        a2,
        "--compute",
        "1e24",
        "--budget-flops",
        "3e18",
        "--max-runs",
        "6",
        "--sweep",
        spec,
        "--json",
    )
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert 1 <= len(p["runs"]) <= 6 and p["spent_flops"] <= 3e18
    assert sum(x["flops"] for x in p["runs"]) == pytest.approx(p["spent_flops"])
    assert p["after"]["width_ratio"]["N_opt"] < 1.0 and p["today"]["verdict"] == "not identified at this budget"
    lo, hi = p["today"]["N_opt_interval"]
    alo, ahi = p["after"]["N_opt_interval"]
    assert lo < alo < ahi < hi
    s = yaml.safe_load(spec.read_text())
    assert s["kind"] == "zip" and len(s["axes"]["model"]) == len(p["runs"]) == len(s["axes"]["train.tokens"])
    if data_root() is None:
        pytest.skip("bundled corpus not found: `sweep plan`'s pre-flight reads the base config's data")
    # the synthetic law's sizes are far beyond the bundled corpus: repeated data on purpose, to see it expand
    r = scalelab("sweep", "plan", spec, "--allow-repeats", env={"SCALELAB_DATA_ROOT": str(data_root())})
    assert r.returncode == 0, r.stderr
    assert f"{len(p['runs'])} runs" in r.stdout


def test_study_next_target_weighs_the_intervals_the_user_asks_for(fits):
    """--target n-opt / loss weigh one interval alone (the criterion's weights: unit-tested on designs known in
    closed form, test_information.py): they choose other runs than each other, and the JSON says which
    criterion chose them; the forecast reports both intervals either way."""
    *_, a3, a2 = fits
    args = ["study", "next", a3, "--compute", "1e21", "--budget-flops", "3e18", "--forecast-draws", "0", "--json"]
    out = {}
    for t in ("both", "n-opt", "loss"):
        r = scalelab(*args, "--target", t)
        assert r.returncode == 0, r.stderr
        out[t] = json.loads(r.stdout)
        assert out[t]["target"] == t
    assert "Var(log L_opt)" not in out["n-opt"]["criterion"] and "Var(log N_opt)" not in out["loss"]["criterion"]
    picks = {t: sorted((r["N"], r["D"]) for r in p["runs"]) for t, p in out.items()}
    assert picks["n-opt"] != picks["loss"]
    assert all(set(p["after"]["width_ratio"]) == {"N_opt", "loss"} for p in out.values())
    r = scalelab(*args[:2], a2, "--law", "batch-lr", "--compute", "1e21", "--budget-flops", "3e18", "--target", "loss")
    assert r.returncode == 2


def test_study_next_from_a_menu_writes_the_chosen_rows_as_they_are(fits, tmp_path):
    *_, a3, a2 = fits
    menu = tmp_path / "menu.csv"
    rows = [
        {"name": f"r{i}", "N": f"{n:.6g}", "D": f"{r * n:.6g}", "owner": "lab-b"}
        for i, (n, r) in enumerate((n, r) for n in np.geomspace(5e6, 5e8, 5) for r in (5, 20, 80))
    ]
    with menu.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "chosen.csv"
    args = ["study", "next", a3, "--compute", "1e22", "--budget-flops", "1e18", "--max-runs", "4"]
    r = scalelab(*args, "--candidates", menu, "--out", out)
    assert r.returncode == 0, r.stderr
    assert "today" in r.stdout and "after the proposed runs" in r.stdout
    chosen = list(csv.DictReader(out.open()))
    assert 1 <= len(chosen) <= 4 and all(c in rows for c in chosen)
    assert sum(6 * float(c["N"]) * float(c["D"]) for c in chosen) <= 1e18 * (1 + 1e-9)
    bad = tmp_path / "bad.csv"
    bad.write_text("params,steps\n1,2\n")
    r = scalelab(*args, "--candidates", bad)
    assert r.returncode == 2 and "needs a column N" in r.stderr
    r = scalelab(*args, "--out", out)
    assert r.returncode == 2 and "--candidates" in r.stderr


def test_the_plan_view_marks_the_budgets_the_law_cannot_answer(fits):
    """The dashboard's Plan view rows carry each budget's verdict; the warnings that explain it are
    grouped under it, not repeated among the view's other warnings."""
    from dashboard.views.plan import CSV_COLUMNS, budgets, plan_rows

    a3, a2, *_ = fits
    rows, warnings, _ = plan_rows(a3, budgets(a3, None, 1e24, 4), None, 0.95, [a2])
    ids = [r["identified"] for r in rows]
    assert ids[0] and not ids[-1] and ids == sorted(ids, reverse=True)  # answered near the runs, not far out
    assert rows[-1]["verdict"] == "not identified at this budget" and rows[-1]["verdict_reasons"]
    assert rows[-1]["N_opt_lo"] < rows[-1]["N_opt"] < rows[-1]["N_opt_hi"]
    grouped = {w for r in rows for w in r["verdict_warnings"]}
    assert grouped and not grouped & set(warnings)
    assert "verdict" in CSV_COLUMNS


def test_the_batch_lr_law_gets_its_own_verdict(fits):
    """Exponents need 3 or more compute groups: with 2 the law is not identified and says why; with 3
    its lr and batch intervals at the planned run are judged by the same span."""
    from scaling.fits.batch_lr import fit_batch_lr
    from scaling.synthetic.runs import batch_lr_sweep

    a3, *_ = fits
    two = fit_batch_lr(batch_lr_sweep(budgets=(1e17, 1e18)))
    v = make_plan([a3, two], 1e19, vocab_size=4096)["verdict"]
    assert v["batch_lr"]["status"] == "not identified at this budget"
    assert any("exponents need 3 or more" in r for r in v["batch_lr"]["reasons"])
    three = fit_batch_lr(batch_lr_sweep(budgets=(1e17, 1e18, 1e19)), bootstrap=30)
    plan = make_plan([a3, three], 1e19, vocab_size=4096)
    hp = plan["verdict"]["batch_lr"]
    assert hp["n_groups"] == 3 and hp["lr_interval"] == plan["run"]["lr_interval"]
    assert hp["status"] == ("identified" if not hp["reasons"] else "not identified at this budget")


def test_study_next_proposes_the_compute_groups_a_batch_lr_law_needs(tmp_path):
    """Two groups cannot carry exponents: `study next --law batch-lr` adds groups within the budget,
    at the ends of the affordable compute range (extrapolating a line: Elfving), each a lr x batch grid."""
    from scaling.fits.batch_lr import fit_batch_lr
    from scaling.synthetic.runs import batch_lr_sweep

    rec = fit_batch_lr(batch_lr_sweep(budgets=(1e17, 1e18)))
    path = rec.save(tmp_path / "hp.json")
    r = scalelab("study", "next", path, "--law", "batch-lr", "--compute", "1e21", "--budget-flops", "3e20", "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert p["groups_today"] == 2 and len(p["groups"]) >= 1 and p["spent_flops"] <= 3e20
    Cs = [g["C"] for g in p["groups"]]
    assert max(Cs) * 15 <= 3e20 and max(Cs) > 1e18 and p["width_ratio"] < 1.0
    assert all(len(g["lrs"]) * len(g["batch_tokens"]) == g["runs"] for g in p["groups"])
    r = scalelab("study", "next", path, "--law", "batch-lr", "--compute", "1e21", "--budget-flops", "1e17")
    assert r.returncode == 2 and "buys no group" in r.stderr
    r = scalelab(
        "study", "next", path, "--law", "batch-lr", "--compute", "1e21", "--budget-flops", "3e20", "--max-epochs", "8"
    )
    assert r.returncode == 2 and "--max-epochs caps the candidate runs' repeats" in r.stderr


def test_study_next_writes_the_batch_lr_groups_as_a_sweep_the_launcher_expands(tmp_path):
    """--law batch-lr --sweep: one model per proposed compute group (its tokens spend the group's compute)
    and its lr x batch grid, as a kind batch_lr spec that `sweep plan` expands to exactly those runs."""
    from launch.sweep.naming import fmt_num
    from scaling.fits.batch_lr import fit_batch_lr
    from scaling.synthetic.runs import batch_lr_sweep

    path = fit_batch_lr(batch_lr_sweep(budgets=(1e17, 1e18))).save(tmp_path / "hp.json")
    spec = tmp_path / "next.yaml"
    args = ["study", "next", path, "--law", "batch-lr", "--compute", "1e21", "--budget-flops", "3e20"]
    r = scalelab(*args, "--max-runs", "3", "--sweep", spec, "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    s = yaml.safe_load(spec.read_text())
    assert s["kind"] == "batch_lr" and (tmp_path / "next.base.yaml").exists()
    bl = s["batch_lr"]
    assert len(bl["models"]) == len(p["groups"]) == 3 and len(bl["lr_factors"]) * len(bl["batch_factors"]) == 15
    for g in p["groups"]:
        own = bl["per_model"][g["label"]]
        assert own["tokens"] == int(g["D"]) and g["N"] * g["D"] * 6 == pytest.approx(g["C"], rel=1e-6)
        assert own["lr"] == pytest.approx(g["lr_centre"], rel=1e-5) and len(g["batch_sizes"]) == 3
    r = scalelab(*args, "--candidates", spec)
    assert r.returncode == 2 and "--candidates and --out are for --law chinchilla" in r.stderr
    if data_root() is None:
        pytest.skip("bundled corpus not found: `sweep plan`'s pre-flight reads the base config's data")
    # the synthetic law's sizes are far beyond the bundled corpus: repeated data on purpose, to see it expand
    r = scalelab("sweep", "plan", spec, "--allow-repeats", env={"SCALELAB_DATA_ROOT": str(data_root())})
    assert r.returncode == 0, r.stderr
    assert "45 runs (batch_lr)" in r.stdout
    for g in p["groups"]:  # every proposed (batch, lr) pair is a run, named by its values
        for b in g["batch_sizes"]:
            for lr in g["lrs"]:
                assert f"{g['label']}-b{b}-lr{fmt_num(lr)} " in r.stdout


def test_study_next_fits_runs_given_instead_of_a_record(tmp_path):
    table = tmp_path / "runs.csv"
    chinchilla_table(budgets=(1e17, 3e17, 1e18), noise=0.01).to_csv(table, index=False)
    # the refit forecast is test_study_next_forecast.py's: here the Fisher one keeps it quick
    args = ["study", "next", table, "--compute", "1e21", "--budget-flops", "1e19", "--json", "--forecast-draws", "0"]
    r = scalelab(*args, "--bootstrap", "20")
    assert r.returncode == 0, r.stderr
    assert "fitting approach 3" in r.stderr and json.loads(r.stdout)["runs"]
    r = scalelab(*args, "--bootstrap", "5")
    assert r.returncode == 2 and "--bootstrap must be >= 10" in r.stderr


def test_the_main_jobs_next_sweep_is_refitted_and_replanned(tmp_path):
    """launch.quickstart.next_sweep (plan.next_sweep): approach 3 refitted on the IsoFLOP runs and the
    next sweep's with the first fit's settings, the verdicts at 10x and 1000x before and after, in the report."""
    from launch.quickstart.next_sweep import _before_after, refit_and_replan
    from tests.helpers import write_isoflop_tree

    iso = write_isoflop_tree(tmp_path / "iso", budgets=(1e13, 4e13), noise=0.004)
    nxt = write_isoflop_tree(tmp_path / "next", budgets=(1.6e14,), noise=0.004, seed=1)
    fits = tmp_path / "fits"
    fits.mkdir()
    fit_chinchilla(iso, n_kind="non_embedding", top_k=8, bootstrap=20).save(fits / "chinchilla-a3.json")
    (tmp_path / "plan").mkdir()
    d = refit_and_replan(tmp_path, fits, iso, nxt)
    after = FitRecord.load(fits / "chinchilla-a3-next.json")
    assert d["n_points_after"] == after["n_points"] > d["n_points_before"]
    assert after["settings"]["bootstrap"] == 20 and after["conventions"]["n_kind"] == "non_embedding"
    assert [b["multiplier"] for b in d["budgets"]] == [10.0, 1000.0]
    assert json.loads((tmp_path / "plan" / "next-replan.json").read_text()) == d
    table = "\n".join(_before_after(d))
    assert table.count("| before |") == 2 and table.count("| after |") == 2
