"""The run registry knows the optimizer: `optim` from each run's config.yaml (`optim.name`; a
config written before the key existed trained with the schema default, adamw), shown and filtered
by `scalelab runs list`."""

from __future__ import annotations

import pytest

from rundir.read import CONFIG_DEFAULTS, config_value, load_runs
from tests.helpers import write_run


def _runs(root):
    done = {"status": "done", "steps": 10, "tokens": 1e6, "params": 1e5, "final_loss": 4.0}
    write_run(root / "s" / "old", config={"optim": {"lr": 3e-3}, "model": {"d_model": 32}}, summary=done)
    write_run(root / "s" / "mu", config={"optim": {"lr": 3e-3, "name": "muon"}, "model": {"d_model": 32}}, summary=done)
    write_run(root / "s" / "aw", config={"optim": {"name": "adamw"}}, summary=done)
    return root


def test_registry_rows_carry_the_optimizer(tmp_path):
    df, problems = load_runs(_runs(tmp_path))
    assert problems == []
    assert dict(zip(df["run"], df["optim"])) == {"old": "adamw", "mu": "muon", "aw": "adamw"}
    assert config_value({"optim": {}}, "optim.name") == "adamw"
    assert config_value({"optim": {"name": "muon"}}, "optim.name") == "muon"
    assert config_value({}, "model.d_model") is None and config_value({}, "model.d_model", 7) == 7


def test_schema_default_is_the_registry_default():
    schema = pytest.importorskip("pretrain.config.schema")
    field = schema.OptimConfig.model_fields.get("name")
    if field is None:
        pytest.skip("this checkout's trainer has no optim.name yet")
    assert field.default == CONFIG_DEFAULTS["optim.name"]
