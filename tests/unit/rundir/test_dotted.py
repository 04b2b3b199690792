"""Dotted keys read from a config that was never validated: absent parts read as absent, never raise."""

from rundir.dotted import get_dotted, has_dotted
from rundir.read import config_value

CFG = {"optim": {"name": "muon", "lr": None}, "model": "n50k"}


def test_get_dotted_reads_nested_keys_and_absent_ones_as_the_default():
    assert get_dotted(CFG, "optim.name") == "muon"
    assert get_dotted(CFG, "optim.lr", 1.0) is None  # present, null
    assert get_dotted(CFG, "train.steps") is None and get_dotted(CFG, "train.steps", 7) == 7
    assert get_dotted(CFG, "model.d_model") is None  # a section that is not a mapping
    assert get_dotted(None, "optim.name") is None


def test_has_dotted_tells_a_null_value_from_a_missing_key():
    assert has_dotted(CFG, "optim.lr") and not has_dotted(CFG, "optim.wd") and not has_dotted(None, "optim")


def test_config_value_falls_back_to_the_schema_default_only_when_missing():
    assert config_value({"optim": {}}, "optim.name") == "adamw"
    assert config_value({"optim": {"name": None}}, "optim.name") is None
