"""Shape rules (models/design.py) and `scalelab model design`: exact counts of published models,
every rule within its stated tolerance from 1e6 to 1e12 parameters, and a designed model that trains."""

from __future__ import annotations

import json

import pytest
import yaml

from models.accounting import model_counts
from models.config import ModelConfig
from tests.helpers import REPO, metrics, run_cli, scalelab, tiny_overrides


# ------------------------------------------------------------------ the CLI
def test_cli_prints_the_shape_and_writes_a_model_file(tmp_path):
    r = scalelab(
        "model",
        "design",
        "--params",
        "7e10",
        "--vocab-size",
        "32000",
        "--kv-heads",
        "8",
        "--out",
        "m.yaml",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "shape rule marin" in r.stdout and "n_kv_heads 8" in r.stdout and "target 7e+10 (total)" in r.stdout
    m = yaml.safe_load((tmp_path / "m.yaml").read_text())
    assert set(m) == {
        "d_model",
        "n_layers",
        "n_heads",
        "n_kv_heads",
        "d_ff",
        "vocab_size",
        "seq_len",
        "tie_embeddings",
        "moe",
    }
    total = model_counts(ModelConfig(**m)).total
    assert abs(total / 7e10 - 1) <= 0.02 and f"total {total:,}" in r.stdout
    j = scalelab(
        "model",
        "design",
        "--params",
        "1e8",
        "--rule",
        "olmo-ladder",
        "--n-kind",
        "non_embedding",
        "--vocab-size",
        "50304",
        "--seq-len",
        "4096",
        "--json",
        cwd=tmp_path,
    )
    rec = json.loads(j.stdout)
    assert rec["shape_rule"] == "olmo-ladder" and rec["n_kind"] == "non_embedding" and rec["model"]["seq_len"] == 4096
    assert abs(rec["non_embedding_params"] / 1e8 - 1) <= 0.02
    assert rec["flops_per_token"] > 6 * rec["non_embedding_params"]


@pytest.mark.parametrize(
    "args, option",
    [
        (["--params", "0"], "--params"),
        (["--params", "1e9", "--rule", "x"], "--rule"),
        (["--params", "1e9", "--n-kind", "active"], "--n-kind"),
        (["--params", "1e9", "--vocab-size", "1.5"], "--vocab-size"),
    ],
)
def test_cli_bad_options_exit_2_naming_the_option(tmp_path, args, option):
    r = scalelab("model", "design", *args, cwd=tmp_path)
    assert r.returncode == 2 and option in r.stderr


def test_a_designed_model_trains_through_the_cli(tiny_data, tmp_path):
    r = scalelab(
        "model",
        "design",
        "--params",
        "6e4",
        "--vocab-size",
        "512",
        "--seq-len",
        "64",
        "--out",
        "tiny.yaml",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    designed = yaml.safe_load((tmp_path / "tiny.yaml").read_text())
    over = [
        o
        for o in tiny_overrides(
            tiny_data, **{"train.steps": 2, "train.checkpoint_every_steps": 0, "train.eval_every_steps": 0}
        )
        if not o.startswith("model")
    ]
    res = run_cli(
        ["train", str(REPO / "configs/train/tiny.yaml"), "model=tiny.yaml", *over, "--run-dir", "run", "--no-progress"],
        tmp_path,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    cfg = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["model"]
    assert {k: cfg[k] for k in designed} == designed
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["params"] == model_counts(ModelConfig(**designed)).total and s["steps"] == 2
    assert len(metrics(tmp_path / "run")) == 2
