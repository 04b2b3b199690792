"""Critical batch from run directories: steps to a target loss read from metrics.jsonl curves with
a known truth (scaling/synthetic/curves.py), the noise-scale column, holdout, bootstrap, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scaling.fits import critical_batch as cb
from scaling.fits import steps_to_target as stt
from scaling.fits.critical_batch import fit_critical_batch
from scaling.synthetic.curves import CurveTruth, write_curve_runs

TRUTH = CurveTruth()


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """3 model sizes x 7 batch sizes (512..32768 tokens), fixed tokens per model, noisy training
    loss logged like the trainer, grad_noise_scale probed every 20 steps."""
    return write_curve_runs(tmp_path_factory.mktemp("cb") / "runs", noise_scale_every=20, seed=0)


def _truth(m):
    return float(TRUTH.b_crit(m["N"], m["target_loss"])), float(TRUTH.s_min(m["N"], m["target_loss"]))


def test_recovers_known_bcrit_per_model_and_target(tree):
    rec = fit_critical_batch(tree)
    rows = rec["models"]
    assert len(rows) == 9 and {r["n_batches"] for r in rows} == {7}  # 3 automatic targets per model
    for m in rows:
        bcrit, s_min = _truth(m)
        assert m["B_crit"] == pytest.approx(bcrit, rel=0.02), m  # measured: <= 0.8% off
        assert m["S_min"] == pytest.approx(s_min, rel=0.02)
        assert m["B_crit"] == pytest.approx(m["E_min"] / m["S_min"])
        assert m["D_at_B_crit"] == pytest.approx(2 * m["E_min"])
        assert m["B_overhead20"] == pytest.approx(m["B_crit"] / 5 + 1.2 * 512)
        # the trainer-style noise probe (true B_crit at the current loss, 5% noise) is reported near the target
        assert m["noise_scale"] == pytest.approx(bcrit, rel=0.1) and m["noise_scale_runs"] == 7
    # B_crit(N) on each model's lowest target: the exponent of the truth at those same points
    prim = sorted((m for m in rows if m["primary"]), key=lambda m: m["N"])
    assert [m["target_loss"] for m in prim] == [
        min(r["target_loss"] for r in rows if r["group"] == m["group"]) for m in prim
    ]
    true_exp = np.polyfit(np.log([m["N"] for m in prim]), np.log([_truth(m)[0] for m in prim]), 1)[0]
    assert rec.params["bcrit_exp_N"] == pytest.approx(true_exp, abs=0.02)
    true_exp_D = np.polyfit(
        np.log([2 * _truth(m)[0] * _truth(m)[1] for m in rows]), np.log([_truth(m)[0] for m in rows]), 1
    )[0]
    assert rec.params["bcrit_exp_D"] == pytest.approx(true_exp_D, abs=0.02)
    assert rec.params["alphaB"] > 0 and {"bcrit_joint_exp_N", "bcrit_joint_exp_D"} <= set(rec.params)
    s = rec["settings"]
    assert s["targets"]["mode"] == "auto" and s["metric"] == "loss" and "log(steps)" in s["smoothing"]
    # every run reaches every automatic target
    assert all(t["status"] == "ok" for t in rec["steps_to_target"]) and len(rec["steps_to_target"]) == 21 * 3


def test_steps_to_target_not_total_steps(tmp_path):
    """Every run trains exactly 3000 steps: the old fit (total steps) saw no batch dependence at all."""
    root = write_curve_runs(tmp_path / "runs", models=(1e6, 4e6), steps=3000, seed=1)
    summaries = [json.loads(p.read_text()) for p in root.rglob("summary.json")]
    assert {s["steps"] for s in summaries} == {3000}
    rec = fit_critical_batch(root)
    for m in rec["models"]:
        assert m["B_crit"] == pytest.approx(_truth(m)[0], rel=0.03)
        steps = [p["steps"] for p in m["points"]]
        assert max(steps) / min(steps) > 5 and max(steps) < 3000  # steps to target, falling with batch


def test_never_reaching_run_is_reported_and_excluded(tmp_path):
    root = write_curve_runs(tmp_path / "runs", models=(1e6,), seed=2)
    write_curve_runs(root, models=(1e6,), batches=(2048,), steps=40, sweep="short", seed=3)
    short = "short/n1e+06-b2048"
    rec = fit_critical_batch(root, target_loss=[4.0])
    (m,) = rec["models"]
    assert any(short in w and "never reached target loss 4" in w and "left out" in w for w in rec.warnings)
    assert all(short not in p["runs"] for p in m["points"]) and m["n_runs"] == 7
    assert m["B_crit"] == pytest.approx(float(TRUTH.b_crit(1e6, 4.0)), rel=0.03)
    row = next(t for t in rec["steps_to_target"] if t["run"] == short)
    assert row["status"] == "never" and row["steps"] is None
    # automatic targets: the batch size 2048 counts its best run, so the short run does not drag them up
    auto = fit_critical_batch(root)
    assert len(auto["models"]) == 3 and all(short not in p["runs"] for m in auto["models"] for p in m["points"])
    assert any(short in w and "never reached" in w for w in auto.warnings)


def test_noise_scale_not_measured_without_probes(tmp_path):
    root = write_curve_runs(tmp_path / "runs", models=(1e6,), seed=4)
    rec = fit_critical_batch(root)
    assert all(m["noise_scale"] is None and "not measured" in m["noise_scale_note"] for m in rec["models"])
    assert "not measured" in rec.summary()


def test_holdout_largest_predicts_from_the_others(tree):
    rec = fit_critical_batch(tree, holdout="largest")
    ho = rec["holdout"]
    assert ho["model_N"] == pytest.approx(1.6e7)
    rest = [m for m in rec["models"] if m["group"] != max(r["group"] for r in rec["models"])]
    prim = [m for m in rest if m["primary"]]
    e, c = np.polyfit(np.log([m["N"] for m in prim]), np.log([m["B_crit"] for m in prim]), 1)
    assert ho["predicted_from_N"] == pytest.approx(np.exp(c) * 1.6e7**e, rel=1e-9)
    assert ho["rel_error_from_N"] == pytest.approx(ho["predicted_from_N"] / ho["B_crit_fitted"] - 1)
    e, c = np.polyfit(np.log([m["D_at_B_crit"] for m in rest]), np.log([m["B_crit"] for m in rest]), 1)
    assert ho["predicted_from_D"] == pytest.approx(np.exp(c) * ho["D_at_B_crit"] ** e, rel=1e-9)
    assert (
        ho["max_abs_rel_error"] < 0.2
    )  # measured: +9.5% from N, -10.9% from D (the truth is no pure power law in N or D)
    assert "holdout (largest model N=1.6e+07)" in rec.summary()


def test_bootstrap_resamples_runs_and_explains_failures(tmp_path):
    root = write_curve_runs(tmp_path / "runs", models=(1e6, 4e6), batches=(1024, 4096, 16384), seed=5)
    rec = fit_critical_batch(root, bootstrap=30, seed=0)
    b = rec["bootstrap"]
    # 3 runs per model resampled with replacement keep all 3 batch sizes in only 2/9 of draws per model
    assert b["failed"] > 0 and sum(b["failed_reasons"].values()) == b["failed"]
    assert all(why.startswith("resample left") and "3+ batch sizes" in why for why in b["failed_reasons"])
    assert "runs within each model size" in b["method"]
    assert all(m["B_crit_bootstrap_n"] < 30 for m in rec["models"])


def test_bootstrap_programming_error_fails_the_fit(tree, monkeypatch):
    real = cb.fit_steps_curve
    from scaling.fits.critical_batch import mccandlish  # where the per-(model, target) fit calls it

    calls = {"n": 0}

    def flaky(B, S):
        calls["n"] += 1
        if calls["n"] > 9:  # the full fit's 9 (model, target) fits pass; the first resample hits a bug
            raise ZeroDivisionError("bug")
        return real(B, S)

    monkeypatch.setattr(mccandlish, "fit_steps_curve", flaky)
    with pytest.raises(ZeroDivisionError):
        fit_critical_batch(tree, bootstrap=3)


def test_curve_reading_conventions(tmp_path):
    lines = [
        {"step": 10, "loss": 5.0, "grad_noise_scale": 100.0},
        {"step": 20, "loss": 4.0, "grad_noise_scale": 100.0},
        {"step": 30, "loss": 3.0, "val_loss": 3.5, "grad_noise_scale": 300.0},
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines) + '\n{"step": 40, "lo')  # torn last line
    c, why = stt.read_curve(path, "loss", 0.0)
    assert why is None and c.x.tolist() == [
        4.5,
        14.5,
        24.5,
    ]  # mean over (prev, s]: model after (prev + s - 1)/2 updates
    assert c.noise_x.tolist() == [10, 30] and c.noise.tolist() == [100.0, 300.0]  # repeats of one probe count once
    assert stt.first_crossing(c.x, c.loss, 3.5) == (pytest.approx(19.5), "ok")
    assert stt.first_crossing(c.x, c.loss, 2.0) == (None, "never")
    assert stt.first_crossing(c.x, c.loss, 6.0) == (None, "before-first-record")
    v, _ = stt.read_curve(path, "val_loss")
    assert v.x.tolist() == [30.0]


def test_smoothing_has_no_lag_on_log_linear_curves():
    x = np.arange(1, 2001, dtype=float)
    y = 6.0 - 0.4 * np.log(x)
    assert np.allclose(stt.smooth_log_linear(x, y, 0.1), y)
    rng = np.random.default_rng(0)
    noisy = y + 0.02 * rng.standard_normal(x.size)
    sm = stt.smooth_log_linear(x, noisy, 0.1)
    assert np.std((sm - y)[1000:]) < 0.2 * np.std((noisy - y)[1000:])
