"""A fit's recipe keys are the train config's keys: scaling may not import the schema (the layers), so the
recipe keeps its own list, and this test holds it to the schema, so a renamed key fails here and not as a
recipe that silently records None."""

from __future__ import annotations

import typing

import yaml
from pydantic import BaseModel

from pretrain.config.roles import sweep_axis_labels
from pretrain.config.schema import TrainConfig
from scaling.data.recipe import RECIPE_KEYS, SWEPT, read_recipe


def submodels(annotation) -> list:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in submodels(a)]


def leaf_keys(model, prefix: str = "") -> set[str]:
    out = set()
    for name, field in model.model_fields.items():
        subs = submodels(field.annotation)
        if not subs:
            out.add(prefix + name)
        for sub in subs:
            out |= leaf_keys(sub, prefix + name + ".")
    return out


def test_every_recipe_key_is_a_setting_of_the_train_config():
    keys = leaf_keys(TrainConfig)
    assert [k for k in RECIPE_KEYS if k not in keys] == []
    assert len(set(RECIPE_KEYS)) == len(RECIPE_KEYS)


def test_the_settings_a_law_s_runs_vary_on_purpose_are_sweep_axes_of_the_recipe():
    assert set(SWEPT) <= set(RECIPE_KEYS) and set(SWEPT) <= set(sweep_axis_labels())
    # not every sweep axis: runs of one law that differ in weight decay saw two recipes (the record warns)
    assert "optim.weight_decay" in sweep_axis_labels() and "optim.weight_decay" not in SWEPT


def test_a_recipe_warns_of_a_varied_weight_decay_not_of_a_varied_lr(tmp_path):
    runs = []
    for i, (lr, wd) in enumerate(((1e-3, 0.1), (3e-3, 0.1), (3e-3, 0.0))):
        d = tmp_path / f"r{i}"
        d.mkdir()
        (d / "config.yaml").write_text(yaml.safe_dump({"optim": {"lr": lr, "weight_decay": wd}}))
        runs.append(str(d))
    rec = read_recipe(runs)
    assert rec["varies"] == ["optim.weight_decay"]
    assert rec["settings"]["optim.lr"] == 3e-3 and rec["settings"]["optim.weight_decay"] == 0.1
