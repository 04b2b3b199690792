"""`scalelab fit lr-annealing` on real run directories (two tiny runs: constant and WSD) and
`scalelab predict-curve` on a run's own config."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from launch.cli import main as scalelab
from tests.helpers import REPO, requires_corpus, run_cli, tiny_overrides

STEPS = 60


@pytest.fixture(scope="module")
def runs(tiny_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("lra") / "runs"
    root.mkdir()
    for name in ("constant", "wsd"):
        over = tiny_overrides(
            tiny_data,
            **{
                "train.steps": STEPS,
                "train.log_every_steps": 2,
                "train.eval_every_steps": 20,
                "train.checkpoint_every_steps": 0,
                "optim.lr": 0.01,
                "schedule.name": name,
                "schedule.warmup_steps": 4,
                "schedule.decay_fraction": 0.3,
            },
        )
        r = run_cli(
            ["train", str(REPO / "configs/train/tiny.yaml"), *over, "--run-dir", str(root / name), "--no-progress"],
            root,
        )
        assert r.returncode == 0, r.stdout + r.stderr
    return root


def cli(args, capsys):
    code = scalelab(args)
    out = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)


@requires_corpus
def test_fit_reads_lr_from_the_config_and_windows_from_metrics(runs, capsys):
    r = cli(["fit", "lr-annealing", str(runs), "--json"], capsys)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["input"] == "runs" and [c["run"] for c in rec["curves"]] == ["constant", "wsd"]
    assert not any("differs from the config" in w for w in rec["warnings"])  # the schedule reproduces every logged lr
    for c in rec["curves"]:
        assert c["lr_source"].startswith("config schedule") and c["steps"] == STEPS and c["peak_lr"] == 0.01
        assert c["warmup_steps"] == 3  # lr_at ramps over 4 steps: the first 3 are below the peak
        # records every 2 steps; each averages the 2 updates before it; every window but the first
        # (from update 0, where S1 = 0): the default --skip-fraction 0 (with 0.1, windows from update 6 on: 27)
        assert c["n_points"] == 29
    assert "mean over its log window" in rec["settings"]["loss_points"]
    assert rec["data_range"]["S2"][1] > 0  # the WSD run anneals: C is identified
    assert np.isfinite(list(rec["params"].values())).all()
    # val_loss has 3 evaluations per run here: too few points, named, exit 2
    r = cli(["fit", "lr-annealing", str(runs), "--metric", "val_loss"], capsys)
    assert r.returncode == 2 and "too few loss points" in r.stderr


@requires_corpus
def test_runs_whose_config_cannot_give_the_lr_are_named(runs, tmp_path, capsys):
    tree = tmp_path / "runs"
    shutil.copytree(runs, tree)
    cfg = yaml.safe_load((tree / "wsd/config.yaml").read_text())
    cfg["optim"]["lr"] = 0.02
    (tree / "wsd/config.yaml").write_text(yaml.safe_dump(cfg))
    summary = json.loads((tree / "wsd/summary.json").read_text())
    summary.pop("peak_lr")  # an older summary: the peak comes from the config, which now disagrees with the log
    (tree / "wsd/summary.json").write_text(json.dumps(summary))
    cfg = yaml.safe_load((tree / "constant/config.yaml").read_text())
    del cfg["schedule"]["decay_shape"]
    (tree / "constant/config.yaml").write_text(yaml.safe_dump(cfg))
    r = cli(["fit", "lr-annealing", str(tree), "--json"], capsys)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert any("run constant: config.yaml lacks schedule.decay_shape; skipped" in w for w in rec["warnings"])
    assert any("run wsd: metrics.jsonl's lr differs from the config's schedule" in w for w in rec["warnings"])


@requires_corpus
def test_predict_curve_from_a_run_config(runs, tmp_path, capsys):
    fit = tmp_path / "fit.json"
    assert cli(["fit", "lr-annealing", str(runs), "--bootstrap", "3", "--out", str(fit)], capsys).returncode == 0
    cfg = str(runs / "constant/config.yaml")
    r = cli(
        ["predict-curve", str(fit), cfg, "schedule.name=cosine", "--json", "--out", str(tmp_path / "c.csv")], capsys
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["steps"] == STEPS and out["schedule"]["name"] == "cosine" and out["log_window"] == 2
    assert not any("differs from the fitted runs" in w for w in out["warnings"])  # same model and batch
    curve = np.loadtxt(tmp_path / "c.csv", delimiter=",", skiprows=1)
    assert curve.shape[0] == STEPS and curve[-1, 2] == pytest.approx(out["final_loss"])
    assert out["final_logged_loss"] == pytest.approx(curve[-3:-1, 2].mean())
    r = cli(["predict-curve", str(fit), cfg, "train.global_batch_size=16", "train.micro_batch_size=16"], capsys)
    assert r.returncode == 0 and "differs from the fitted runs'" in r.stdout
