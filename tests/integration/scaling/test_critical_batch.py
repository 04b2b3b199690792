"""Critical batch from run directories: steps to a target loss read from metrics.jsonl curves with
a known truth (scaling/synthetic/curves.py), the noise-scale column, holdout, bootstrap, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers import REPO, run_cli
from tests.unit.scaling.test_critical_batch import tree  # noqa: F401 (shared with the unit tests)


# ---------------------------------------------------------------- CLI
def test_cli_run_tree_given_targets_holdout_plot(tree, tmp_path):
    out = tmp_path / "cb.json"
    r = run_cli(
        [
            "fit",
            "critical-batch",
            str(tree),
            "--target-loss",
            "3.5",
            "--target-loss",
            "4.0",
            "--holdout",
            "largest",
            "--out",
            str(out),
            "--plot",
            str(tmp_path / "cb.png"),
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "noise scale (B_simple)" in r.stdout and "median of 7 runs" in r.stdout
    rec = json.loads(out.read_text())
    assert rec["settings"]["targets"]["mode"] == "given"
    assert {m["target_loss"] for m in rec["models"]} <= {3.5, 4.0} and (tmp_path / "cb.png").exists()
    assert {"bcrit_coef", "bcrit_exp_N", "bcrit_coef_D", "bcrit_exp_D"} <= set(rec["params"])


def test_cli_bad_options_exit_2(tree, tmp_path, capsys):
    from launch.cli import main

    def code(*args):
        try:
            return main(["fit", "critical-batch", *map(str, args)])
        except SystemExit as exc:  # argparse rejects before any work
            return exc.code

    for bad in (["--target-loss", "-1"], ["--target-loss", "abc"], ["--metric", "acc"]):
        assert code(tree, *bad) == 2, bad
        assert "--target-loss" in capsys.readouterr().err or bad[0] == "--metric"
    assert (
        code(tree, "--smooth", "3") == 2 and "--smooth 3.0: the window's relative half-width" in capsys.readouterr().err
    )
    assert (
        code(tree, "--target-loss", "0.5") == 2 and "no run reached any target loss" in capsys.readouterr().err
    )  # nobody gets there
    table = tmp_path / "t.csv"
    table.write_text("N,batch_tokens,steps\n1e6,512,100\n1e6,1024,60\n1e6,2048,40\n")
    assert code(table, "--metric", "val_loss") == 2 and "run-directory tree" in capsys.readouterr().err


@pytest.mark.slow
def test_real_trainer_runs_end_to_end(tiny_data, tmp_path):
    """Three tiny real runs at 256/512/1024-token batches with the noise probe on: the CLI reads
    their curves and reports a finite B_crit next to the measured noise scale."""
    from tests.helpers import tiny_overrides

    for gbs in (4, 8, 16):
        over = tiny_overrides(
            tiny_data,
            **{
                "train.steps": 40,
                "train.micro_batch_size": 4,
                "train.global_batch_size": gbs,
                "train.eval_every_steps": 0,
                "train.checkpoint_every_steps": 0,
                "optim.lr": 0.01,
                "schedule.name": "constant",
                "schedule.warmup_steps": 4,
                "train.noise_scale_every_steps": 4,
            },
        )
        r = run_cli(
            ["train", str(REPO / "configs/train/tiny.yaml"), *over, "--run-dir", f"runs/b{gbs}", "--no-progress"],
            tmp_path,
        )
        assert r.returncode == 0, r.stdout + r.stderr
    r = run_cli(["fit", "critical-batch", "runs", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["n_points"] == 3 and rec["models"]
    for m in rec["models"]:
        assert np.isfinite(m["B_crit"]) and m["B_crit"] > 0 and m["n_batches"] == 3
        assert m["noise_scale"] is not None and m["noise_scale"] > 0 and m["noise_scale_runs"] >= 1
