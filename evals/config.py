"""`eval:` section of a train config: in-loop lm-eval evaluation at checkpoints.

Evaluation runs on a just-saved checkpoint (the only consistent copy of the weights on every
ZeRO stage), by default in a subprocess, so an exception, OOM or hang in evaluation is
recorded as failed and training continues.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from base.strict import StrictModel


class EvalSection(StrictModel):
    suite: str | None = Field(
        "tiny", description="suite in configs/evals/ (tiny, standard) or a YAML path; null: only `tasks`"
    )
    tasks: list[str] | None = Field(
        None, description="task names: a subset of the suite, or the task list when suite is null"
    )
    every_tokens: int | None = Field(
        None,
        gt=0,
        description="evaluate at the first checkpoint at or after every multiple of this many training tokens "
        "(evaluation needs a checkpoint: set train.checkpoint_every_steps accordingly); null: only at the end",
    )
    at_end: bool = Field(True, description="also evaluate the final checkpoint")
    limit: int | float | None = Field(
        None, description="documents per task, overriding the suite's limits (<1: fraction)"
    )
    num_fewshot: int | None = Field(None, ge=0, description="few-shot examples, overriding the suite's")
    online: bool = Field(False, description="use the stock lm-eval tasks (downloads data) instead of the local copies")
    device: str | None = Field(None, description="evaluation device (default: cuda if available, else cpu)")
    batch_size: int = Field(
        32,
        gt=0,
        description="distinct contexts per forward pass (loglikelihood requests sharing a context are scored together)",
    )
    threads: int | None = Field(None, gt=0, description="torch CPU threads for evaluation (default: torch's choice)")
    subprocess: bool = Field(
        True,
        description="run each evaluation in a child process (isolates crashes/OOM); false: in-process with try/except",
    )
    timeout_s: float = Field(
        1500.0,
        gt=0,
        description="an evaluation running longer is stopped and recorded as failed (keep it "
        "below the process-group timeout: other ranks wait at a barrier meanwhile)",
    )

    @field_validator("every_tokens", mode="before")
    @classmethod
    def _float_tokens(cls, v: Any) -> Any:
        try:
            f = float(v) if isinstance(v, (str, float)) else None
        except ValueError:
            return v
        return int(f) if f is not None and f.is_integer() else v

    @model_validator(mode="after")
    def _suite_or_tasks(self) -> EvalSection:
        if self.suite is None and not self.tasks:
            raise ValueError("eval: set eval.suite or eval.tasks")
        return self
