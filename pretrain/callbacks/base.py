"""The callback base class and the narrow view of the run a callback sees.

The trainer's loop only puts components in order (pretrain/engine/trainer.py); each concern (checkpoints,
metrics file, W&B, console, evaluation, probes) is a `Callback` in its own file. Hooks, in the
order the trainer calls them:

    pre_train                     once, before the first step (the checkpointer resumes here)
    pre_step                      before each step's micro-batches
    post_train_batch(out)         after the optimizer step (`out`: the step's `StepOutput`)
    log_metrics(step, rec)        on log steps, with the record reduced over the ranks (every rank:
                                  writers act on the main rank only)
    post_step                     last in each step (checkpoint cadence)
    post_checkpoint_saved(path)   after each checkpoint is complete on every rank (from the
                                  checkpointer's post_step or post_train)
    post_train                    when the loop ended without an error (done, or stopped by a signal)
    on_error(exc)                 when it ended with one (the run is recorded as failed)
    close                         always, last

Callbacks run in descending `priority`. A callback reads the run through `self.trainer.info`
(a `StepInfo`), records values with `self.trainer.record_metric`, and accounts time spent
outside training with `with self.trainer.paused("eval"):`. State that must survive a resume goes
through `state_dict`/`load_state_dict`: the checkpoint keeps it in its client state under `name`.

The trainer's side of the contract (pretrain/engine/trainer.py), all a callback should touch: `info`,
`record_metric`, `paused`, `request_stop(reason)`, `state` (step, wall_s, eval_s, paused_s, stopping,
stop_reason, lineage), and at the end `status`, `error`, `summary`; for the checkpointer
`state_dict()`, `load_state_dict(client)`, `begin_branch(...)` and `checkpoint_saved(path)`. Objects a
callback works on (the train module, the data feed) are given to it when it is built
(pretrain/callbacks/config.py: `RunParts`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pretrain.config.schema import TrainConfig
    from pretrain.engine.train_module import StepOutput
    from rundir.layout import RunDir


@dataclass(frozen=True)
class StepInfo:
    """What a callback may know about the run (cf. Levanter's StepInfo)."""

    step: int  # the current step, 1-based: in pre_step the one about to run, afterwards the one just done
    total_steps: int
    tokens: int  # training tokens once `step` is done
    run_dir: RunDir
    config: TrainConfig
    is_main: bool
    log: Callable[[str], None]  # one message line (main rank only)
    log_step: bool = False  # this step writes a metrics record
    eval_step: bool = False  # this step runs the held-out evaluation
    resumed: bool = False  # this attempt continues from a checkpoint


class Callback:
    name: str = ""  # key of this callback's state in checkpoints; empty: no state
    priority: int = 0  # higher runs first
    trainer: Any = None

    def attach(self, trainer) -> None:
        self.trainer = trainer

    @property
    def info(self) -> StepInfo:
        return self.trainer.info

    def pre_train(self) -> None:
        pass

    def pre_step(self) -> None:
        pass

    def post_train_batch(self, out: StepOutput) -> None:
        pass

    def log_metrics(self, step: int, rec: dict) -> None:
        pass

    def post_step(self) -> None:
        pass

    def post_checkpoint_saved(self, path: Path) -> None:
        pass

    def post_train(self) -> None:
        pass

    def on_error(self, exc: BaseException) -> None:
        pass

    def close(self) -> None:
        pass

    def state_dict(self) -> dict | None:
        return None

    def load_state_dict(self, state: dict) -> None:
        pass
