"""Crash-safe writes and tolerant reads of the run directory's small files.

A reader never sees a half-written summary, marker or config: each is written to a temporary
file in the same folder, fsynced, and renamed over the old one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml


def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk, an interrupt: no half-written temporary left beside the file
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def read_json(path: Path) -> dict | None:
    """The JSON object in `path`, None when it is missing, torn or not an object."""
    try:
        obj = json.loads(Path(path).read_text())
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def read_yaml(path: Path):
    """The YAML document in `path` (C loader when available: config files are read by the thousand).
    Raises FileNotFoundError, yaml.YAMLError, UnicodeDecodeError as they come."""

    return yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
