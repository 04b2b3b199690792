"""A fit's recipe carries the runs' parametrization, base shapes and lr (what a plan reproduces), and
warns when sp and μP runs are mixed in one law."""

from __future__ import annotations

import yaml

from scaling.data.recipe import read_recipe, recipe_warning


def run_dir(root, name: str, parametrization: str, lr: float) -> str:
    d = root / name
    d.mkdir()
    model = {"d_model": 48, "n_layers": 2, "parametrization": parametrization, "mup_base_width": 16}
    (d / "config.yaml").write_text(yaml.safe_dump({"model": model, "optim": {"lr": lr}}))
    return str(d)


def test_recipe_records_mup_and_the_lr(tmp_path):
    rec = read_recipe([run_dir(tmp_path, f"r{i}", "mup", 6e-3) for i in range(2)])
    st = rec["settings"]
    assert st["model.parametrization"] == "mup" and st["model.mup_base_width"] == 16 and st["optim.lr"] == 6e-3
    assert recipe_warning(rec) is None


def test_mixing_sp_and_mup_runs_warns(tmp_path):
    rec = read_recipe([run_dir(tmp_path, "a", "mup", 6e-3), run_dir(tmp_path, "b", "sp", 3e-3)])
    assert "model.parametrization" in rec["varies"] and "optim.lr" not in rec["varies"]
    assert "the runs differ in model.parametrization" in recipe_warning(rec)
