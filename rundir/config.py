"""A run's resolved `config.yaml`, and the model it describes, without the trainer's schema.

Readers that rebuild a run's model (evaluation, export) need only its `model` section, a
`models.config.ModelConfig`, and the tokens per optimizer step; the full training schema lives
in `pretrain.config` and is not needed to read a finished run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from models.config import ModelConfig
from rundir.checkpoints import CheckpointError
from rundir.files import read_yaml
from rundir.layout import CONFIG

if TYPE_CHECKING:
    from models.config import ModelConfig


@dataclass
class RunModel:
    model: ModelConfig
    tokens_per_step: int | None  # train.global_batch_size x model.seq_len
    raw: dict  # the whole config.yaml


def read_config(run_dir: str | Path) -> dict:
    """config.yaml as a dict; CheckpointError when it is missing or not a mapping."""
    path = Path(run_dir) / CONFIG
    try:
        raw = read_yaml(path)
    except FileNotFoundError:
        raise CheckpointError(f"{run_dir}: {CONFIG} missing; is this a scalelab run directory?") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path}: not a mapping; is this a scalelab run directory?")
    return raw


def run_model(run_dir: str | Path) -> RunModel:
    """The model section of a run's config.yaml, validated as `ModelConfig`."""

    raw = read_config(run_dir)
    try:
        model = ModelConfig.model_validate(raw.get("model"))
    except ValidationError as exc:
        raise CheckpointError(
            f"{Path(run_dir) / CONFIG}: its model section is not a valid model config:\n{exc}"
        ) from None
    gbs = (raw.get("train") or {}).get("global_batch_size")
    return RunModel(model=model, tokens_per_step=gbs * model.seq_len if isinstance(gbs, int) else None, raw=raw)
