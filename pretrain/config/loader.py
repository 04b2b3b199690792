"""YAML -> typed train config: preset resolution over base/config_files.py's file and override reader.

A section given as a string names a preset file: `model: tiny` reads configs/models/tiny.yaml,
`data: default` reads configs/data/default.yaml, `deepspeed: zero1` reads
configs/deepspeed/zero1.yaml; a path ending in .yaml works too. A mapping with a `preset` key
starts from that preset and overrides its fields.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from base.config_files import PROJECT_ROOT, configs_dir, format_validation_error, parse_override, read_yaml
from base.config_files import apply_overrides as _apply_overrides
from base.config_files import apply_parsed as _apply_parsed
from pretrain.config.schema import TrainConfig
from pretrain.errors import ConfigError

PRESET_DIRS = {"model": "models", "data": "data", "deepspeed": "deepspeed"}


def _preset_path(section: str, ref: str) -> Path:
    if ref.endswith((".yaml", ".yml")):
        for base in (Path.cwd(), PROJECT_ROOT):
            if (base / ref).exists():
                return base / ref
        raise ConfigError(f"{section}: preset file not found: {ref}")
    folder = configs_dir() / PRESET_DIRS[section]
    path = folder / f"{ref}.yaml"
    if not path.exists():
        names = sorted(p.stem for p in folder.glob("*.yaml"))
        raise ConfigError(f"{section}: unknown preset '{ref}'; allowed: {', '.join(names) or '(none)'}")
    return path


def resolve_section(section: str, value: Any) -> Any:
    """Expand a preset reference (string or mapping with `preset`) into a plain mapping."""
    if section not in PRESET_DIRS:
        return value
    if isinstance(value, str):
        body = read_yaml(_preset_path(section, value))
        if section == "model":
            # the preset's name, not Path.stem: "gpt-1.3b" must stay "gpt-1.3b", not become "gpt-1"
            body.setdefault("preset", re.sub(r"\.ya?ml$", "", Path(value).name))
        return body
    if isinstance(value, dict) and section == "model" and "preset" in value:
        base = read_yaml(_preset_path(section, value["preset"]))
        base.update(value)
        return base
    return value


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """A copy of a train config's `raw` with `key.sub=value` overrides applied, presets expanded
    (`model=small`, then `model.n_layers=4` on top of it)."""
    return _apply_overrides(raw, overrides, resolve_section)


def apply_parsed(cfg: dict[str, Any], parsed: list[tuple[list[str], Any]]) -> dict[str, Any]:
    """Apply already-parsed (path, value) overrides to `cfg` in place, presets expanded (sweeps call this directly)."""
    return _apply_parsed(cfg, parsed, resolve_section)


def _rebase_presets(raw: dict[str, Any], overrides: list[str]) -> list[str]:
    """Apply `model=X` / `model.preset=X` before presets are expanded, so the new preset's
    fields replace the old preset's while the file's own keys (e.g. `model.moe`) are kept."""
    rest = []
    for item in overrides:
        path, value = parse_override(item)
        if path[0] in PRESET_DIRS and (len(path) == 1 or (len(path) == 2 and path[1] == "preset")):
            section = raw.get(path[0])
            if len(path) == 2 and isinstance(section, dict):
                section["preset"] = value
            else:
                raw[path[0]] = value
            continue
        rest.append(item)
    return rest


def build_train_raw(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    raw = read_yaml(path)
    raw.setdefault("name", Path(path).stem)
    rest = _rebase_presets(raw, overrides or [])
    for section in PRESET_DIRS:
        if section in raw:
            raw[section] = resolve_section(section, raw[section])
    return apply_overrides(raw, rest)


def validate_train(raw: dict[str, Any]) -> TrainConfig:
    try:
        return TrainConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, TrainConfig)) from None


def check_trainer_builds(cfg: TrainConfig) -> None:
    """Refuse, before any work, a model the trainer does not build (`model.mla`, `model.mtp_depth`: priced by
    `scalelab plan --model` only)."""
    keys = cfg.model.priced_only()
    if keys:
        raise ConfigError(
            f"{' and '.join(keys)}: the trainer does not build multi-head latent attention or multi-token "
            "prediction; the planner prices them (`scalelab plan --model CONFIG --tokens D --device NAME "
            f"--num-devices K`); remove {' and '.join(keys)} to train the rest of the model"
        )


def load_train_config(path: str | Path, overrides: list[str] | None = None) -> TrainConfig:
    return validate_train(build_train_raw(path, overrides))


def dump_config(cfg: BaseModel) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
