"""Run the trainer in this process with an extra recording callback and report what it saw.

The callback tests call `main(spec)` in the test process (inside `inprocess.isolated`); as a
script it prints the same as one line `RESULT {json}`:

    python tests/helpers/trainer.py '{"config": ..., "overrides": [...], "run_dir": ..., "compare_checkpoint": 4}'

The result: the exit code, the hooks called with their steps, the state the callback got back
from a checkpoint, the optimizer's param groups (name, lr, weight_decay, lr_mult) after the last
step, and (with compare_checkpoint) whether the weights in memory at the end equal that checkpoint's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pretrain.callbacks.base import Callback


class Recorder(Callback):
    """Every hook with the step it saw; its state (steps trained so far) goes through checkpoints."""

    name = "test_recorder"
    priority = -10  # after every built-in callback

    def __init__(self):
        self.events: list[list] = []
        self.steps_seen = 0
        self.loaded: dict | None = None

    def pre_train(self):
        self.events.append(["pre_train", self.info.step])

    def pre_step(self):
        self.events.append(["pre_step", self.info.step])

    def post_train_batch(self, out):
        self.steps_seen += 1
        self.events.append(["post_train_batch", self.info.step])

    def log_metrics(self, step, rec):
        self.events.append(["log_metrics", step, rec["step"]])

    def post_step(self):
        self.events.append(["post_step", self.info.step])

    def post_checkpoint_saved(self, path):
        self.events.append(["post_checkpoint_saved", self.info.step, Path(path).name])

    def post_train(self):
        self.events.append(["post_train", self.info.step, self.trainer.status])

    def on_error(self, exc):
        self.events.append(["on_error", self.info.step, type(exc).__name__])

    def close(self):
        self.events.append(["close"])

    def state_dict(self):
        return {"steps_seen": self.steps_seen}

    def load_state_dict(self, state):
        self.loaded = dict(state)
        self.steps_seen = state["steps_seen"]


def main(spec: dict) -> dict:
    from pretrain.cli import _prepare_data, _with_vocab
    from pretrain.config.loader import load_train_config
    from pretrain.engine.distributed import setup, teardown
    from pretrain.engine.trainer import Trainer

    cfg = load_train_config(spec["config"], spec["overrides"])
    dist = setup(cfg.train.threads, cfg.train.deterministic)
    try:
        prepared = _prepare_data(cfg, dist)
        cfg = _with_vocab(cfg, prepared.vocab_size)
        Path(spec["run_dir"]).mkdir(parents=True, exist_ok=True)
        rec = Recorder()
        trainer = Trainer(cfg, Path(spec["run_dir"]), dist, prepared, callbacks=[rec], progress=False)
        trainer.build()
        rc = trainer.train()
        out = {"rc": rc, "events": rec.events, "loaded": rec.loaded, "steps_seen": rec.steps_seen}
        # the optimizer's param groups as the last step left them (the engine's: ZeRO wraps them)
        out["groups"] = [
            {k: g.get(k) for k in ("name", "lr", "weight_decay", "lr_mult")}
            for g in trainer.module.optimizer.param_groups
        ]
        if spec.get("compare_checkpoint") is not None:
            from rundir.weights import read_state_dict

            saved = read_state_dict(Path(spec["run_dir"]) / "checkpoints" / f"step_{spec['compare_checkpoint']}")
            now = trainer.module.model.state_dict()
            out["weights_equal_checkpoint"] = sorted(saved) == sorted(now) and all(
                bool((saved[k] == now[k].cpu()).all()) for k in saved
            )
        return out
    finally:
        teardown(dist, clean=True)


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(json.loads(sys.argv[1]))), flush=True)
