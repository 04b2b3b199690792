"""The run directory is the contract between trainer, sweeps, fitter, evals and dashboard.

runs/<sweep>/<run>/ holds config.yaml (resolved), metrics.jsonl (one record per log step),
summary.json (atomic, written when the run ends), checkpoints/, wandb/, evals/.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    config = property(lambda self: self.path / "config.yaml")
    metrics = property(lambda self: self.path / "metrics.jsonl")
    summary = property(lambda self: self.path / "summary.json")
    checkpoints = property(lambda self: self.path / "checkpoints")
    wandb = property(lambda self: self.path / "wandb")
    evals = property(lambda self: self.path / "evals")

    def read_summary(self) -> dict | None:
        return read_json(self.summary)

    def write_summary(self, summary: dict) -> None:
        atomic_write_json(self.summary, summary)
