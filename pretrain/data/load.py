"""A data config file -> DataConfig: `key.sub=value` overrides applied, its name from the file, readable errors.

The data package loads its own configs (base/config_files.py's YAML and override reader), so `scalelab data` and
mixtures never import the train config's loader; the train config (pretrain/config/loader.py) imports this one.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from base.config_files import apply_overrides, format_validation_error, read_yaml
from base.errors import ConfigError
from pretrain.data.config import DataConfig


def load_data_config(path: str | Path, overrides: list[str] | None = None) -> DataConfig:
    raw = apply_overrides(read_yaml(path), overrides or [])
    raw.setdefault("name", Path(path).stem)
    try:
        return DataConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, DataConfig, prefix="data.")) from None
