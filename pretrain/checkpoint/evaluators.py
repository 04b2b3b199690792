"""The interface through which the trainer evaluates checkpoints as they are saved (the `eval:`
section of a train config), and how it finds the package that implements it.

pretrain never imports an evaluation package: one registers itself under the entry point group
`scalelab.checkpoint_evaluators` with the name `eval` (scalelab's lm-eval evaluator,
`evals.inloop:EVALUATOR`, is declared in pyproject.toml). The registered object provides

    section                      the pydantic model of the `eval:` section; it has at least
                                 `every_tokens: int | None` and `at_end: bool`, which the trainer's
                                 cadence reads (pretrain/callbacks/inloop_eval.py)
    check(section)               raise ValueError naming a wrong suite/task/data: the trainer
                                 turns it into a configuration error (exit 2) before any work
    done(section, run_dir, step) results of this step are already there (a resumed run re-saves
                                 its final checkpoint: it is not evaluated twice)
    evaluate(section, job)       evaluate `job.checkpoint` and record the results (and failures)
                                 itself; `job` is an `EvalJob`

The trainer calls `evaluate` on the main rank with the time excluded from training throughput,
and catches anything it raises: evaluation never stops training.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from pydantic import model_validator

from base.strict import StrictModel

GROUP = "scalelab.checkpoint_evaluators"
NAME = "eval"


@dataclass(frozen=True)
class EvalJob:
    checkpoint: Path  # checkpoints/step_<N>, complete
    run_dir: Path
    step: int
    tokens: int
    wandb: bool  # mirror results to the run's W&B run (False when train wandb.mode is disabled)
    log: Callable[[str], None]


class CheckpointEvaluator(Protocol):
    section: type

    def check(self, section: Any) -> None: ...

    def done(self, section: Any, run_dir: Path, step: int) -> bool: ...

    def evaluate(self, section: Any, job: EvalJob) -> None: ...


@functools.cache
def evaluator() -> CheckpointEvaluator | None:
    """The registered evaluator, or None when no package registered one."""
    found = entry_points(group=GROUP, name=NAME)
    return next(iter(found)).load() if found else None


class NoEvaluator(StrictModel):
    """Stands in for the `eval:` schema when no evaluator is installed: any value is refused."""

    @model_validator(mode="before")
    @classmethod
    def _refuse(cls, v: Any) -> Any:
        raise ValueError(
            f"no checkpoint evaluator is installed (entry point group {GROUP}, name {NAME!r}); "
            "reinstall scalelab (make setup) or remove the eval section"
        )


def section_type() -> type:
    ev = evaluator()
    return ev.section if ev is not None else NoEvaluator
