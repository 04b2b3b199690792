"""Named evaluation suites (`configs/evals/<name>.yaml`): task lists with few-shot and limits.

A suite entry is a task name or `{task, num_fewshot, limit}`; the suite's own `num_fewshot` and
`limit` are the defaults. Tasks with the same settings run in one lm-eval call.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import Field, ValidationError

from base.strict import StrictModel
from evals.tasks import EvalError

PROJECT_ROOT = Path(__file__).resolve().parents[1]


class TaskEntry(StrictModel):
    task: str = Field(description="lm-eval task name (local or stock)")
    num_fewshot: int | None = Field(None, ge=0, description="few-shot examples (default: the suite's)")
    limit: int | float | None = Field(-1, description="documents per task (default: the suite's; null: all)")


class Suite(StrictModel):
    name: str = ""
    description: str = ""
    num_fewshot: int = Field(0, ge=0)
    limit: int | float | None = None
    tasks: list[str | TaskEntry]

    def entries(self, limit_override: int | float | None = None, tasks: list[str] | None = None) -> list[TaskEntry]:
        """Resolved entries; a CLI `--limit` overrides every per-task limit."""
        out = []
        for e in self.tasks:
            e = TaskEntry(task=e) if isinstance(e, str) else e
            limit = self.limit if e.limit == -1 else e.limit
            if limit_override is not None:
                limit = limit_override
            if tasks and e.task not in tasks:
                continue
            out.append(
                TaskEntry(
                    task=e.task, num_fewshot=self.num_fewshot if e.num_fewshot is None else e.num_fewshot, limit=limit
                )
            )
        return out


def suites_dir() -> Path:
    return Path(os.environ.get("SCALELAB_CONFIGS", PROJECT_ROOT / "configs")) / "evals"


def load_suite(name_or_path: str) -> Suite:
    p = Path(name_or_path)
    if not p.suffix:
        p = suites_dir() / f"{name_or_path}.yaml"
    if not p.exists():
        names = sorted(x.stem for x in suites_dir().glob("*.yaml"))
        raise EvalError(f"unknown suite '{name_or_path}'; available: {', '.join(names) or '(none)'}")
    try:
        data = yaml.safe_load(p.read_text()) or {}
        suite = Suite.model_validate({"name": p.stem, **data})
    except (yaml.YAMLError, ValidationError) as exc:
        raise EvalError(f"{p}: invalid suite: {exc}") from None
    return suite


def adhoc(tasks: list[str], limit: int | float | None, num_fewshot: int = 0) -> Suite:
    """A suite built from `--tasks` (name 'custom')."""
    return Suite(name="custom", num_fewshot=num_fewshot, limit=limit, tasks=list(tasks))
