"""The lr-annealing law (Tissue et al. 2024): areas, recovery of a known law from synthetic curves,
table inputs (lr on logged steps only, empty losses), holdouts, bootstrap, CLI exit codes and keys."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from launch.cli import main as scalelab
from scaling.fits.lr_annealing.fit import fit_lr_annealing
from tests.helpers import REPO

# shared with the unit tests
from tests.unit.scaling.test_lr_annealing import LAW, PEAK, SCHEDULES, TRUTH, T, schedule, table  # noqa: F401


# ---------------------------------------------- CLI (in-process: the same parser and exit codes, without start-up time)
def run_cli(args, capsys):
    code = scalelab(args)
    out = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)


def test_cli_fit_json_keys_and_exit_codes(tmp_path, capsys):
    csv = tmp_path / "curves.csv"
    table(runs=("constant", "wsd-linear", "cosine"), seed=7).rename(columns={"loss": "train_loss"}).to_csv(
        csv, index=False
    )
    out = tmp_path / "fit.json"
    r = run_cli(
        ["fit", "lr-annealing", str(csv), "--col", "loss=train_loss", "--bootstrap", "4", "--json", "--out", str(out)],
        capsys,
    )
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["law"] == "lr-annealing" and set(rec["params"]) == {"L0", "A", "alpha", "C"}
    assert (
        rec["settings"]["lambda"] == 0.999 and rec["settings"]["delta"] == 1e-3 and rec["settings"]["warmup"] == "peak"
    )
    assert {"S1", "S2", "step", "warmup", "lambda"} <= set(rec["conventions"])
    assert set(rec["intervals"]) == {"L0", "A", "alpha", "C"} and len(rec["bootstrap"]["samples"]["C"]) <= 4
    assert json.loads(out.read_text())["params"] == rec["params"]
    r = run_cli(["fit", "lr-annealing", str(csv)], capsys)
    assert r.returncode == 2 and "'loss'" in r.stderr and "--col" in r.stderr
    r = run_cli(["fit", "lr-annealing", str(csv), "--col", "loss=train_loss", "--lambda", "1.5"], capsys)
    assert r.returncode == 2 and "--lambda" in r.stderr
    r = run_cli(["fit", "lr-annealing", str(csv), "--col", "loss=nope"], capsys)
    assert r.returncode == 2 and "no column 'nope'" in r.stderr


def test_cli_predict_curve(tmp_path, capsys):
    fit = tmp_path / "fit.json"
    fit_lr_annealing(table(seed=8), bootstrap=6).save(fit)
    args = [
        "predict-curve",
        str(fit),
        str(REPO / "configs/train/tiny.yaml"),
        "train.tokens=null",
        f"train.steps={T}",
        f"optim.lr={PEAK}",
        "schedule.name=wsd",
        "schedule.decay_shape=sqrt",
    ]
    r = run_cli(args + ["--json", "--out", str(tmp_path / "curve.csv")], capsys)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    truth = LAW.final(schedule("wsd", "sqrt"))
    assert out["final_loss"] == pytest.approx(truth, rel=3e-3) and out["steps"] == T
    lo, hi = out["final_loss_interval"]
    assert lo <= out["final_loss"] <= hi
    curve = pd.read_csv(tmp_path / "curve.csv")
    assert list(curve.columns) == ["step", "lr", "loss", "loss_lo", "loss_hi"] and len(curve) == T
    assert curve["loss"].iloc[-1] == pytest.approx(out["final_loss"])
    r = run_cli(args, capsys)
    assert r.returncode == 0 and "predicted final loss" in r.stdout
    r = run_cli(args + ["schedule.nmae=wsd"], capsys)
    assert r.returncode == 2 and "schedule.nmae" in r.stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"law": "chinchilla", "params": {}}))
    r = run_cli(["predict-curve", str(other), str(REPO / "configs/train/tiny.yaml")], capsys)
    assert r.returncode == 2 and "lr-annealing" in r.stderr
