"""YAML -> typed config: preset resolution, `key.sub=value` overrides, readable errors.

A section given as a string names a preset file: `model: tiny` reads configs/models/tiny.yaml,
`data: default` reads configs/data/default.yaml, `deepspeed: zero1` reads
configs/deepspeed/zero1.yaml; a path ending in .yaml works too. A mapping with a `preset` key
starts from that preset and overrides its fields.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from pretrain.config.schema import TrainConfig
from pretrain.data.config import DataConfig
from pretrain.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PRESET_DIRS = {"model": "models", "data": "data", "deepspeed": "deepspeed"}


def configs_dir() -> Path:
    return Path(os.environ.get("SCALELAB_CONFIGS", PROJECT_ROOT / "configs"))


def read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


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


def parse_key_value(item: Any, what: str = "override") -> tuple[str, Any]:
    """The one reader of `key.sub=value` (train and data overrides, a sweep's `set:` list and its
    `--set` edits): the key as written, the value as YAML (`a=` is the empty string; text that is
    not YAML stays text). ConfigError (a ValueError) naming the item when it is no key=value."""
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(f"{what} {item!r} must look like key.sub=value")
    key, raw = item.split("=", 1)
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"{what} {item!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def parse_override(item: str) -> tuple[list[str], Any]:
    key, value = parse_key_value(item)
    return key.split("."), value


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    return apply_parsed(copy.deepcopy(raw), [parse_override(o) for o in overrides])


def apply_parsed(cfg: dict[str, Any], parsed: list[tuple[list[str], Any]]) -> dict[str, Any]:
    """Apply already-parsed (path, value) overrides to `cfg` in place (sweeps call this directly)."""
    # Whole-section replacements (model=small) first, so model.n_layers=4 applies on top.
    for path, value in sorted(parsed, key=lambda kv: len(kv[0])):
        if any(not part for part in path):
            raise ConfigError(f"override {'.'.join(path)}: empty key")
        if len(path) == 1:
            cfg[path[0]] = resolve_section(path[0], value)
            continue
        if path[0] in PRESET_DIRS:
            cfg[path[0]] = resolve_section(path[0], cfg.get(path[0], {}))
        node = cfg
        for i, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                where = ".".join(path[: i + 1])
                raise ConfigError(f"override {'.'.join(path)}: '{where}' is not a section")
            node = child
        node[path[-1]] = value
    return cfg


def _allowed_keys(model: type[BaseModel], loc: tuple) -> list[str] | None:
    """Walk the schema along `loc` (minus the offending key) and list the allowed keys."""
    cls: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = getattr(cls, "model_fields", {}).get(part)
        if field is None:
            return None
        ann = field.annotation
        cls = next(
            (a for a in getattr(ann, "__args__", (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)), None
        )
        if cls is None:
            origin_args = getattr(ann, "__args__", ())
            cls = next(
                (
                    b
                    for a in origin_args
                    for b in getattr(a, "__args__", ())
                    if isinstance(b, type) and issubclass(b, BaseModel)
                ),
                None,
            )
        if cls is None:
            return None
    return sorted(getattr(cls, "model_fields", {}).keys())


def format_validation_error(exc: ValidationError, model: type[BaseModel], prefix: str = "") -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        key = prefix + ".".join(str(p) for p in loc) if loc else (prefix.rstrip(".") or "config")
        if err["type"] == "extra_forbidden":
            allowed = _allowed_keys(model, loc)
            msg = "unknown key" + (f"; allowed keys: {', '.join(allowed)}" if allowed else "")
        elif err["type"] == "missing":
            msg = "required key is missing"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if (
                "input" in err
                and err["type"] not in ("value_error", "assertion_error")
                and not isinstance(err["input"], dict)
            ):
                msg += f" (got {err['input']!r})"
        lines.append(f"  {key}: {msg}")
    return "invalid configuration:\n" + "\n".join(lines)


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


def load_train_config(path: str | Path, overrides: list[str] | None = None) -> TrainConfig:
    return validate_train(build_train_raw(path, overrides))


def load_data_config(path: str | Path, overrides: list[str] | None = None) -> DataConfig:
    raw = apply_overrides(read_yaml(path), overrides or [])
    raw.setdefault("name", Path(path).stem)
    try:
        return DataConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, DataConfig, prefix="data.")) from None


def dump_config(cfg: BaseModel) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
