"""The CLI end to end in subprocesses: exit codes, records, plots, plan and emitted configs."""

from __future__ import annotations

import json
import time

import pytest

from scaling.synthetic.runs import batch_lr_sweep, chinchilla_table, critical_batch_table, write_run_tree
from tests.helpers import epoch_csv, scalelab


def test_help_is_fast_and_lists_commands():
    t = time.perf_counter()
    r = scalelab("fit", "--help")
    assert r.returncode == 0 and "chinchilla" in r.stdout and "critical-batch" in r.stdout
    r = scalelab("plan", "--help")
    assert r.returncode == 0 and "--emit-config" in r.stdout
    assert time.perf_counter() - t < 60


def test_fit_epoch_writes_record_and_plot(tmp_path):
    out, png = tmp_path / "fit.json", tmp_path / "fit.png"
    r = scalelab("fit", "chinchilla", epoch_csv(), "--drop-highest", "5", "--out", out, "--plot", png, "--top-k", "8")
    assert r.returncode == 0, r.stderr
    rec = json.loads(out.read_text())
    assert rec["law"] == "chinchilla" and rec["approach"] == 3 and rec["n_points"] == 240
    assert rec["objective"] <= 0.0010182740 + 1e-9
    assert abs(rec["params"]["alpha"] - 0.3473) < 0.002
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    assert "alpha" in r.stdout


def test_bad_inputs_exit_2_with_one_line(tmp_path):
    r = scalelab("fit", "chinchilla", tmp_path / "missing.csv")
    assert r.returncode == 2 and r.stderr.strip().startswith("error: data not found")
    bad = tmp_path / "bad.csv"
    df = chinchilla_table(noise=0.0, n_per_budget=4)
    df.loc[2, "loss"] = float("nan")
    df.to_csv(bad, index=False)
    r = scalelab("fit", "chinchilla", bad)
    assert r.returncode == 2 and "NaN" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = scalelab("fit", "chinchilla", bad, "--col", "loss=nope")
    assert r.returncode == 2 and "nope" in r.stderr
    r = scalelab("fit", "batch-lr", bad)
    assert r.returncode == 2 and "missing column for 'lr'" in r.stderr
    r = scalelab("fit", "chinchilla", bad, "--plot", tmp_path / "x.txt")
    assert r.returncode == 2 and "--plot" in r.stderr
    r = scalelab("plan", "--fit", bad, "--compute", "1e21")
    assert r.returncode == 2 and "not a JSON fit record" in r.stderr
    r = scalelab("plan", "--fit", bad, "--compute", "-3")
    assert r.returncode == 2


def test_run_tree_fit_then_plan_emits_loadable_config(tmp_path):
    runs = tmp_path / "runs"
    write_run_tree(runs, chinchilla_table(budgets=(1e15, 1e16, 1e17), n_per_budget=5, noise=0.003))
    fit = tmp_path / "fits" / "tiny.json"
    r = scalelab("fit", "chinchilla", runs, "--out", fit, "--bootstrap", "10", "--top-k", "8", "--holdout", "largest")
    assert r.returncode == 0, r.stderr
    rec = json.loads(fit.read_text())
    assert rec["holdout"]["n_points"] >= 1 and any("failed" in w for w in rec["warnings"])
    sweep = tmp_path / "bslr.csv"
    batch_lr_sweep(budgets=(1e15, 1e16, 1e17)).to_csv(sweep, index=False)
    bfit = tmp_path / "fits" / "bslr.json"
    r = scalelab("fit", "batch-lr", sweep, "--out", bfit, "--bootstrap", "10")
    assert r.returncode == 0, r.stderr
    cfg = tmp_path / "next.yaml"
    r = scalelab(
        "plan", "--fit", fit, "--fit", bfit, "--compute", "3e17", "--emit-config", cfg, "--out", tmp_path / "plan.json"
    )
    assert r.returncode == 0, r.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    run = plan["run"]
    for src, k in ((plan, "N_opt"), (plan, "D_opt"), (run, "lr"), (run, "batch_tokens"), (run, "loss")):
        assert src[k] > 0
        assert src[k + "_interval"][0] <= src[k] <= src[k + "_interval"][1]
    assert plan["conventions"] == {"compute": "6ND_total", "n_kind": "total"}
    # the fit's warnings reach the plan, prefixed with the fit they came from
    assert any(w.startswith("chinchilla approach 3 fit:") and "failed" in w for w in plan["warnings"])
    assert "prediction interval" in run["loss_interval_kind"]
    from pretrain.config.loader import load_train_config

    tc = load_train_config(cfg)
    assert tc.model.preset == run["preset"]
    assert tc.optim.lr == pytest.approx(run["lr"], rel=1e-3)
    assert tc.train.global_batch_size % tc.train.micro_batch_size == 0
    assert tc.train.tokens == pytest.approx(3e17 / (6 * run["N"]), rel=1e-6)


def test_plan_warns_on_far_extrapolation(tmp_path):
    fit = tmp_path / "f.json"
    assert (
        scalelab("fit", "chinchilla", epoch_csv(), "--drop-highest", "5", "--out", fit, "--top-k", "4").returncode == 0
    )
    r = scalelab("plan", "--fit", fit, "--compute", "1e27", "--json")
    assert r.returncode == 0
    plan = json.loads(r.stdout)
    assert any("extrapolation" in w for w in plan["warnings"])


def test_other_fit_commands(tmp_path):
    cb = tmp_path / "cb.csv"
    critical_batch_table().to_csv(cb, index=False)
    r = scalelab("fit", "critical-batch", cb, "--out", tmp_path / "cb.json", "--plot", tmp_path / "cb.png")
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "cb.json").read_text())
    assert {"bcrit_coef", "bcrit_exp_N"} <= set(rec["params"]) and all("B_crit" in m for m in rec["models"])
    ch = tmp_path / "ch.csv"
    chinchilla_table(noise=0.002).to_csv(ch, index=False)
    r = scalelab("fit", "kaplan", ch, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["law"] == "kaplan"
    r = scalelab(
        "fit", "chinchilla", ch, "--approach", "2", "--plot", tmp_path / "a2.png", "--out", tmp_path / "a2.json"
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a2.png").exists()


def test_curves_flag(tmp_path):
    write_run_tree(tmp_path / "runs", chinchilla_table(budgets=(1e15, 1e16, 1e17), n_per_budget=5, noise=0.0))
    r = scalelab("fit", "chinchilla", tmp_path / "runs", "--approach", "1", "--curves", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["n_points"] == 15 * 18
    r = scalelab("fit", "chinchilla", tmp_path / "runs", "--curves")
    assert r.returncode == 2 and "--curves applies to --approach 1" in r.stderr
