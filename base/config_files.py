"""Config files as every loader reads them: the configs/ folder of presets, a YAML mapping, `key.sub=value`
overrides and a validation error that names each key and what it allows.

Below every config: the train config (pretrain/config/loader.py, which adds its presets), the data config
(pretrain/data/load.py), a sweep spec and the main job's config use these, so none of them imports another's loader.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from base.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def configs_dir() -> Path:
    """The folder of presets (configs/models, configs/data, ...): $SCALELAB_CONFIGS, else the project's configs/."""
    return Path(os.environ.get("SCALELAB_CONFIGS", PROJECT_ROOT / "configs"))


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A config file's top-level mapping ({} for an empty file); ConfigError naming the file otherwise."""
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


def _same(section: str, value: Any) -> Any:
    return value


def apply_parsed(
    cfg: dict[str, Any], parsed: list[tuple[list[str], Any]], expand: Callable[[str, Any], Any] = _same
) -> dict[str, Any]:
    """Apply parsed (path, value) overrides to `cfg` in place. `expand(section, value)` turns a top-level
    section's value into its mapping before a key inside it is set (the train config expands presets there)."""
    # Whole-section replacements (model=small) first, so model.n_layers=4 applies on top.
    for path, value in sorted(parsed, key=lambda kv: len(kv[0])):
        if any(not part for part in path):
            raise ConfigError(f"override {'.'.join(path)}: empty key")
        if len(path) == 1:
            cfg[path[0]] = expand(path[0], value)
            continue
        cfg[path[0]] = expand(path[0], cfg.get(path[0], {}))
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


def apply_overrides(
    raw: dict[str, Any], overrides: list[str], expand: Callable[[str, Any], Any] = _same
) -> dict[str, Any]:
    """A copy of `raw` with the `key.sub=value` overrides applied."""
    return apply_parsed(copy.deepcopy(raw), [parse_override(o) for o in overrides], expand)


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
    """One line per error: the dotted key (after `prefix`) and what is wrong, with the allowed keys for an
    unknown one."""
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
