"""The loss-to-accuracy chain end to end on synthetic run directories with a known truth:
`fit task-loss` (OLMo step 1) and `fit accuracy` (step 2) read each run's evals/<step>.json and
recover the laws; `plan --accuracy --task-loss` predicts a new run's accuracy inside its interval
and carries both fits' warnings; the validation-loss variant chains from the plan's loss."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scaling.fits.accuracy import SigmoidAccuracy, fit_accuracy
from scaling.fits.task_loss import fit_task_loss
from scaling.laws.loss import ChinchillaLaw

LAW = {"E": 0.9, "A": 60.0, "B": 900.0, "alpha": 0.35, "beta": 0.45}  # gold bits per byte of the task


SIG = {"a": 0.45, "b": 0.5, "k": -6.0, "L0": 1.6}  # 2 choices: chance 0.5, ceiling 0.95


VAL = {"E": 1.8, "A": 400.0, "B": 2000.0, "alpha": 0.34, "beta": 0.37}  # validation loss, nats


NS, DS = np.geomspace(2e5, 3e6, 5), np.geomspace(2e6, 5e7, 4)


def write_runs(root, noise=0.0, seed=0, acc_noise=0.0):
    """5 sizes x 4 token counts of finished runs with summary.json and evals/<step>.json."""
    rng = np.random.default_rng(seed)
    tl, val, sig = ChinchillaLaw(**LAW), ChinchillaLaw(**VAL), SigmoidAccuracy(**SIG)
    for N in NS:
        for D in DS:
            run = root / f"n{N:.3g}-d{D:.3g}"
            (run / "evals").mkdir(parents=True)
            bpb = float(tl.predict(N, D)) * np.exp(rng.normal(0, noise))
            acc = float(np.clip(sig.predict(bpb) + rng.normal(0, acc_noise), 0, 1))
            loss = float(val.predict(N, D)) * np.exp(rng.normal(0, noise))
            (run / "summary.json").write_text(
                json.dumps(
                    {
                        "status": "done",
                        "params": N,
                        "tokens": D,
                        "steps": 100,
                        "final_val_loss": loss,
                        "flops_per_token": 6 * N,
                    }
                )
            )
            results = [
                {"task": "blimp_x", "metric": "acc", "value": acc, "n": 1000},
                {"task": "blimp_x", "metric": "gold_bpb", "value": bpb, "n": 1000, "chance": 0.5},
                {"task": "blimp_x", "metric": "gold_nats", "value": bpb * 0.9, "n": 1000, "chance": 0.5},
                # a task stuck at chance: no signal, must be warned in the fit and the plan
                {"task": "hard", "metric": "acc", "value": 0.25 + float(rng.normal(0, 0.004)), "n": 1000},
                {"task": "hard", "metric": "gold_bpb", "value": 1.3 * bpb, "n": 1000, "chance": 0.25},
                {"task": "tinyshakespeare_bpb", "metric": "bits_per_byte", "value": bpb, "n": 29},
            ]
            (run / "evals" / "100.json").write_text(
                json.dumps({"step": 100, "tokens": D, "results": results, "failed": []})
            )
    return root


@pytest.fixture(scope="module")
def clean_runs(tmp_path_factory):
    return write_runs(tmp_path_factory.mktemp("chain") / "runs")


def test_task_loss_and_sigmoid_are_recovered_from_run_directories(clean_runs):
    tl = fit_task_loss(clean_runs, tasks="blimp_x")
    assert tl["law"] == "task-loss" and list(tl["tasks"]) == ["blimp_x"] and tl["settings"]["loss_metric"] == "gold_bpb"
    for k, v in LAW.items():
        assert tl["tasks"]["blimp_x"]["params"][k] == pytest.approx(v, rel=2e-3), k
    acc = fit_accuracy(clean_runs)
    assert set(acc["tasks"]) == {"blimp_x", "hard"}  # tinyshakespeare_bpb has no accuracy
    for k, v in SIG.items():
        assert acc["tasks"]["blimp_x"]["params"][k] == pytest.approx(v, rel=1e-3), k
    assert acc["tasks"]["blimp_x"]["chance"] == 0.5 and acc["tasks"]["hard"]["chance"] == 0.25  # from the evaluations
    assert any(w.startswith("hard: every accuracy is within 0.02 of chance (0.25)") for w in acc["warnings"])
    nats = fit_accuracy(clean_runs, loss_metric="nats", tasks="blimp_x")
    assert nats["tasks"]["blimp_x"]["params"]["L0"] == pytest.approx(SIG["L0"] * 0.9, rel=1e-3)
