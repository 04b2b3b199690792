"""Checkpoints: resume before the first step (or, for a branch without checkpoints of its own,
start from its parent's: `train.init_from`), save every `train.checkpoint_every_steps`, after each
step of `train.checkpoint_at_steps` (never pruned), at the end, and after a step at which the
ranks agreed to stop (SIGTERM/SIGUSR1: callbacks/signals.py).

pretrain/checkpoint/store.py makes each save crash-safe; here the client state is the trainer's (step,
times, skipped steps, RNG and every callback's `state_dict`), and a checkpoint with inf/NaN
weights is never written.
"""

from __future__ import annotations

from pathlib import Path

from pretrain.callbacks.base import Callback
from pretrain.checkpoint import store as checkpoint
from pretrain.config.init_from import differences, parent_config, resolve
from pretrain.errors import TrainingFailed
from rundir.layout import RunDir


class Checkpointer(Callback):
    priority = 100  # resumes before anything opens the run's files; the end-of-run save comes first

    def __init__(self, module):
        self.module = module

    def _agree(self, ok: bool) -> bool:
        return self.module.dist.all_reduce_max(0.0 if ok else 1.0) == 0

    def pre_train(self) -> None:
        """Load the newest loadable checkpoint (raises CheckpointLoadError when none of several loads)."""
        d, info = self.module.dist, self.info
        client = checkpoint.load_latest(
            self.module.engine,
            info.run_dir.checkpoints,
            info.log,
            world_size=d.world_size,
            is_main=d.is_main,
            agree=self._agree,
        )
        if client is None:
            if info.config.train.init_from:
                self._begin_branch()
            return
        self.trainer.load_state_dict(client)
        step = self.info.step
        info.log(f"resumed from checkpoint step_{step} ({step}/{info.total_steps} steps done)")

    def _begin_branch(self) -> None:
        """Load the parent's checkpoint. Every rank resolves `init_from`; a run directory's newest
        checkpoint may move on while the parent trains, so the ranks agree on the newest step seen
        and that step is checked again (pretrain/config/init_from.py) before it is loaded."""

        d, info = self.module.dist, self.info
        parent, _, seen = resolve(info.config.train.init_from)
        step = int(d.all_reduce_max(float(seen)))
        path = RunDir(parent).checkpoint(step)
        problems = differences(parent_config(parent), info.config, step)
        if problems:
            raise TrainingFailed(f"train.init_from: cannot branch from {path}: " + "; ".join(problems))
        client = checkpoint.load_parent(
            self.module.engine,
            path,
            info.run_dir.checkpoints,
            info.log,
            world_size=d.world_size,
            is_main=d.is_main,
            agree=self._agree,
        )
        self.trainer.begin_branch(client, parent, step)
        info.log(f"branched from {path}: continuing at step {step + 1} of {info.total_steps} with this run's schedule")

    def post_step(self) -> None:
        info, t = self.info, self.info.config.train
        due = (
            bool(t.checkpoint_every_steps and info.step % t.checkpoint_every_steps == 0)
            or info.step in t.checkpoint_at_steps
        )
        # the last step and a stop are saved once, by post_train
        if due and info.step < info.total_steps and not self.trainer.state.stopping:
            self.save()

    def post_train(self) -> None:
        self.save()
        if self.trainer.status == "preempted":
            self.info.log(
                f"received {self.trainer.state.stop_reason or 'stop signal'}: checkpoint step_{self.info.step} saved; "
                "rerun the same command to resume"
            )

    def save(self) -> Path:
        info, d = self.info, self.module.dist
        if d.all_reduce_max(0.0 if checkpoint.weights_finite(self.module.model) else 1.0) > 0:
            raise TrainingFailed(
                f"non-finite weights at step {info.step}; not saved. The "
                f"last good checkpoint is kept in {info.run_dir.checkpoints}"
            )
        client = self.trainer.state_dict()
        with self.trainer.paused("checkpoint"):  # checkpoints are not training time
            path = checkpoint.save(
                self.module.engine,
                info.run_dir.checkpoints,
                info.step,
                client,
                info.config.train.keep_checkpoints,
                d.is_main,
                d.barrier,
                world_size=d.world_size,
                agree=self._agree,
                pinned=info.config.train.checkpoint_at_steps,
            )
        self.trainer.checkpoint_saved(path)
        return path
