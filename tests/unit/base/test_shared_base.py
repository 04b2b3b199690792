"""The bottom package: one user-error base that the CLI maps to exit 2, one strict config base."""

from __future__ import annotations

import argparse

import pytest
from pydantic import ValidationError

from base.errors import UserError
from base.strict import StrictModel
from evals.suites import Suite
from evals.tasks import EvalError
from launch import cli
from launch.executors.slurm import SlurmError
from launch.sweep.spec import SweepSpec
from models.config import ModelConfig
from models.hf_export import ExportError
from pretrain.errors import ConfigError, DataError
from rundir.checkpoints import CheckpointError
from scaling.core.errors import FitError, InputError


def test_every_layers_user_error_is_one_type_and_a_failed_fit_is_not():
    for err in (ConfigError, DataError, InputError, EvalError, ExportError, CheckpointError, SlurmError):
        assert issubclass(err, UserError), err
    assert not issubclass(FitError, UserError)  # exit 1: the data were fine, the optimiser failed
    assert issubclass(ConfigError, ValueError) and issubclass(DataError, RuntimeError)  # old `except`s still hold


def test_the_cli_turns_an_unreported_user_error_into_exit_2(monkeypatch, capsys):
    def boom(args):
        raise DataError("corpus is empty: data/x")

    def parser():
        p = argparse.ArgumentParser(prog="scalelab")
        p.set_defaults(func=boom)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    assert cli.main([]) == 2
    assert capsys.readouterr().err.strip() == "error: corpus is empty: data/x"


@pytest.mark.parametrize("model", [ModelConfig, SweepSpec, Suite])
def test_every_config_rejects_an_unknown_key(model):
    assert issubclass(model, StrictModel)
    with pytest.raises(ValidationError, match="not_a_key"):
        model.model_validate({"not_a_key": 1})
