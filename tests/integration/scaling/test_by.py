"""`scalelab fit chinchilla|batch-lr DATA --by KEY`: one law per value, and the compute multiplier
between Chinchilla laws checked against a synthetic truth whose multiplier is known analytically
(the other optimizer's tokens are worth k of the baseline's: L_other(N, D) = L_base(N, k D), so
C_base(L) / C_other(L) = k at every scale)."""

from __future__ import annotations

import contextlib
import io
import json

import pandas as pd
import pytest

from launch.cli import main as scalelab
from scaling.laws.hparams import ComputeHParamLaw
from scaling.synthetic.runs import TRUE_CHINCHILLA, batch_lr_sweep, chinchilla_table, data_multiplied, write_run_tree
from tests.unit.scaling.test_by import K  # shared with the unit tests


def cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = scalelab([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def two_optimizers(noise=0.003, budgets=(1e17, 1e18, 1e19, 1e20), n=6):
    a = chinchilla_table(noise=noise, seed=1, n_per_budget=n, budgets=budgets).assign(optimizer="adamw")
    m = chinchilla_table(
        data_multiplied(TRUE_CHINCHILLA, K), noise=noise, seed=2, n_per_budget=n, budgets=budgets
    ).assign(optimizer="muon")
    return pd.concat([a, m], ignore_index=True)


@pytest.fixture(scope="module")
def by_table(tmp_path_factory):
    d = tmp_path_factory.mktemp("by")
    csv = d / "study.csv"
    two_optimizers().to_csv(csv, index=False)
    code, out, err = cli("fit", "chinchilla", csv, "--by", "optimizer", "--bootstrap", "30", "--out", d / "by.json")
    assert code == 0, err
    return csv, json.loads((d / "by.json").read_text()), out


def test_recovers_known_multiplier_with_covering_interval(by_table):
    _, rec, out = by_table
    assert rec["law"] == "chinchilla" and rec["approach"] == 3 and rec["by"] == "optimizer"
    assert list(rec["groups"]) == ["adamw", "muon"]  # the baseline first
    assert rec["conventions"]["compute"] == "6ND_total" and rec["conventions"]["n_kind"] == "total"
    cmp = rec["compare"]
    assert cmp["baseline"] == "adamw" and set(cmp["others"]) == {"muon"}
    m = cmp["others"]["muon"]
    assert m["compute"] == pytest.approx(1e20) and m["n_pairs"] == 30
    assert m["compute_multiplier"] == pytest.approx(K, rel=0.1)
    lo, hi = m["interval"]
    assert lo < K < hi and hi / lo < 1.6
    assert [lv["C"] for lv in m["levels"]] == pytest.approx([1e20, 1e17, 1e21])
    inside = m["levels"][:2]  # within the data: each level's interval covers the truth
    assert all(lv["interval"][0] < K < lv["interval"][1] for lv in inside)
    for g in ("adamw", "muon"):
        e = rec["groups"][g]
        assert e["fitted"] and e["identified"] and e["n_points"] == 24 and len(e["points"]) == 24
        assert e["record"]["bootstrap"]["n"] == 30 and e["record"]["params"]["alpha"] == pytest.approx(0.35, abs=0.03)
    assert rec["settings"]["by"]["seed_per_group"] == {"adamw": 0, "muon": 1}
    # the printed summary: both laws side by side, the multiplier, and the conventions
    assert "optimizer =" in out and "adamw" in out and "muon" in out
    assert "compute = 6ND_total" in out and "muon over adamw: compute multiplier" in out
    assert f"{m['compute_multiplier']:.3g}" in out


def test_baseline_option_inverts_the_multiplier(by_table):
    csv, rec, _ = by_table
    code, out, err = cli("fit", "chinchilla", csv, "--by", "optimizer", "--baseline", "muon", "--json")
    assert code == 0, err
    inv = json.loads(out)["compare"]
    assert inv["baseline"] == "muon" and list(inv["others"]) == ["adamw"]
    assert inv["others"]["adamw"]["compute_multiplier"] == pytest.approx(1 / K, rel=0.1)
    assert inv["others"]["adamw"]["interval"] is None and "--bootstrap" in inv["others"]["adamw"]["note"]


def test_bad_by_options_exit_2_naming_them(by_table, tmp_path):
    csv, _, _ = by_table
    code, _, err = cli("fit", "chinchilla", csv, "--by", "optim.name")
    assert code == 2 and "--by optim.name: no column 'optim.name'" in err and "optimizer" in err
    code, _, err = cli("fit", "chinchilla", csv, "--by", "optimizer", "--baseline", "sgd")
    assert code == 2 and "--baseline sgd" in err and "adamw, muon" in err
    code, _, err = cli("fit", "chinchilla", csv, "--baseline", "adamw")
    assert code == 2 and "--baseline needs --by" in err
    code, _, err = cli("fit", "chinchilla", csv, "--by", "optimizer", "--approach", "2")
    assert code == 2 and "--approach 3" in err
    code, _, err = cli("fit", "chinchilla", csv, "--by", "optimizer", "--plot", tmp_path / "p.png")
    assert code == 2 and "--plot" in err


def test_plan_refuses_a_by_record(by_table, tmp_path):
    csv, _, _ = by_table
    assert cli("fit", "chinchilla", csv, "--by", "optimizer", "--out", tmp_path / "r.json")[0] == 0
    code, _, err = cli("plan", tmp_path / "r.json", "--compute", "1e21")
    assert code == 2 and "one law per value" in err


def test_run_directories_by_config_key_missing_key_means_default(tmp_path):
    """adamw runs written before optim.name existed (no key) and muon runs (optim: {name: muon})."""
    budgets = (1e17, 1e18, 1e19)
    a = chinchilla_table(noise=0.002, seed=1, n_per_budget=5, budgets=budgets)
    m = chinchilla_table(data_multiplied(TRUE_CHINCHILLA, K), noise=0.002, seed=2, n_per_budget=5, budgets=budgets)
    write_run_tree(tmp_path / "runs", a, sweep="adamw", extra_broken=False)
    write_run_tree(tmp_path / "runs", m, sweep="muon", extra_broken=True, optim="muon")
    code, out, err = cli("fit", "chinchilla", tmp_path / "runs", "--by", "optim.name", "--out", tmp_path / "r.json")
    assert code == 0, err
    rec = json.loads((tmp_path / "r.json").read_text())
    assert rec["settings"]["by"]["from"].startswith("config.yaml")
    assert {g: e["n_points"] for g, e in rec["groups"].items()} == {"adamw": 15, "muon": 15}
    assert all(p["run"].startswith("muon/") for p in rec["groups"]["muon"]["points"])
    assert rec["compare"]["others"]["muon"]["compute_multiplier"] == pytest.approx(K, rel=0.1)
    assert "compute = 6ND_total" in out and "N = total parameters" in out
    # a key no run's config has: exit 2 naming it
    code, _, err = cli("fit", "chinchilla", tmp_path / "runs", "--by", "optim.nme")
    assert code == 2 and "'optim.nme'" in err and "30 of 30 runs" in err
    # a section, not a value
    code, _, err = cli("fit", "chinchilla", tmp_path / "runs", "--by", "optim")
    assert code == 2 and "section" in err


def test_group_with_too_few_points_is_not_identified(tmp_path):
    df = two_optimizers(budgets=(1e17, 1e18, 1e19))
    df = pd.concat([df[df.optimizer == "adamw"], df[df.optimizer == "muon"].head(4)])
    df.to_csv(tmp_path / "few.csv", index=False)
    code, out, err = cli("fit", "chinchilla", tmp_path / "few.csv", "--by", "optimizer", "--json")
    assert code == 0, err
    rec = json.loads(out)
    muon = rec["groups"]["muon"]
    assert muon["fitted"] is False and muon["identified"] is False and "too few points" in muon["reason"]
    assert any(w.startswith("optimizer=muon: not fitted, so not identified") for w in rec["warnings"])
    assert rec["compare"]["others"]["muon"]["compute_multiplier"] is None
    code, out, _ = cli("fit", "chinchilla", tmp_path / "few.csv", "--by", "optimizer")
    assert (
        "identified" in out and "NO" in out and "muon: not identified: chinchilla approach 3: too few points: 4" in out
    )
    assert "muon: no compute multiplier" in out


def test_batch_lr_by_fits_each_optimizer(tmp_path):
    fast = ComputeHParamLaw(lr_coef=0.6, lr_exp_C=-0.1, bs_coef=0.292, bs_exp_C=0.3271)
    df = pd.concat([batch_lr_sweep().assign(optimizer="adamw"), batch_lr_sweep(fast, seed=3).assign(optimizer="muon")])
    df.to_csv(tmp_path / "blr.csv", index=False)
    code, out, err = cli("fit", "batch-lr", tmp_path / "blr.csv", "--by", "optimizer", "--out", tmp_path / "blr.json")
    assert code == 0, err
    rec = json.loads((tmp_path / "blr.json").read_text())
    assert rec["law"] == "batch-lr" and rec["by"] == "optimizer" and "compare" not in rec
    got = {g: e["record"]["params"] for g, e in rec["groups"].items()}
    assert got["adamw"]["lr_exp_C"] == pytest.approx(-0.125, abs=0.01) and got["muon"]["lr_exp_C"] == pytest.approx(
        -0.1, abs=0.01
    )
    assert got["muon"]["lr_coef"] == pytest.approx(0.6, rel=0.1)
    header = next(line for line in out.splitlines() if "optimizer =" in line)
    assert header.split()[-2:] == ["adamw", "muon"]  # side by side
    assert any(line.strip().startswith("lr_exp_C") for line in out.splitlines())
    with pytest.raises(SystemExit) as exc:  # batch-lr has no comparison, so no --baseline
        cli("fit", "batch-lr", tmp_path / "blr.csv", "--by", "optimizer", "--baseline", "adamw")
    assert exc.value.code == 2
