"""A run directory written from parts, without training: the one writer of stand-in runs.

Tests (tests/helpers), the dashboard's demo (dashboard.demo.data) and synthetic data with a known
truth (scaling.synthetic) all need run directories that readers cannot tell from the trainer's.
They write them here, through the names of `rundir.layout`, so a renamed file or a changed marker
changes every stand-in with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from rundir.layout import COMPLETE, LATEST, RunDir, checkpoint_tag
from rundir.summary import RunSummary


def write_run(
    path: str | Path,
    *,
    config: Mapping[str, Any] | str | None = None,
    summary: Mapping[str, Any] | RunSummary | str | None = None,
    metrics: Iterable[Mapping[str, Any]] | str | None = None,
    checkpoint: int | None = None,
    evals: Mapping[int, Mapping[str, Any]] | None = None,
) -> Path:
    """The run directory `path` from the parts given, as the trainer would leave it.

    `config`: a dict (written as YAML) or text; `summary`: a dict or `RunSummary`, or text;
    `metrics`: records (one JSON line each) or text; `checkpoint`: a step (an empty
    `checkpoints/step_N` marked COMPLETE, named by `latest`); `evals`: step -> the content of
    `evals/<step>.json`. Text is written as it is, so a test can write a torn or malformed file.
    """
    rd = RunDir(path)
    rd.path.mkdir(parents=True, exist_ok=True)
    if config is not None:
        rd.config.write_text(config if isinstance(config, str) else yaml.safe_dump(dict(config), sort_keys=False))
    if metrics is not None:
        rd.metrics.write_text(metrics if isinstance(metrics, str) else "".join(json.dumps(r) + "\n" for r in metrics))
    if checkpoint is not None:
        ck = rd.checkpoint(checkpoint)
        ck.mkdir(parents=True, exist_ok=True)
        (ck / COMPLETE).write_text(json.dumps({"step": checkpoint}) + "\n")
        (rd.checkpoints / LATEST).write_text(checkpoint_tag(checkpoint) + "\n")
    for step, content in (evals or {}).items():
        rd.evals.mkdir(exist_ok=True)
        rd.eval_file(step).write_text(json.dumps(content))
    if summary is not None:
        if isinstance(summary, RunSummary):
            summary = summary.to_dict()
        rd.summary.write_text(summary if isinstance(summary, str) else json.dumps(summary))
    return rd.path
