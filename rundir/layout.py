"""Every file and marker name of a run directory, and `RunDir`, the paths built from them.

runs/<sweep>/<run>/
  config.yaml            resolved config (trainer, at start)
  launch.yaml            the config a sweep launch trains on (launch)
  metrics.jsonl          one JSON record per log step (trainer)
  summary.json           `RunSummary`, atomically, when the run ends (trainer)
  checkpoints/step_<N>/  DeepSpeed checkpoint; counts once it holds COMPLETE
  checkpoints/latest     the newest complete checkpoint's name
  checkpoints/universal/ conversions for another world size (derived, pruned)
  evals/<step>.json      evaluation results (evals)
  tokenizer.json, tokenizer_meta.json   the run's tokenizer (trainer, at start)
  ranks.json             where the last attempt's ranks ran: rank -> host, address, threads (trainer)
  wandb/, wandb_id       the W&B run and its id (trainer)
  .lock                  flock lock, one JSON line naming the holder (launch)
  train.log              every attempt's output (launch)
  requeues.jsonl         one line per requeue decision (launch, under Slurm)
"""

from __future__ import annotations

from pathlib import Path

CONFIG = "config.yaml"
LAUNCH_CONFIG = "launch.yaml"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
CHECKPOINTS = "checkpoints"
CHECKPOINT_PREFIX = "step_"
COMPLETE = "COMPLETE"  # inside step_<N>/: the checkpoint is whole
LATEST = "latest"
UNIVERSAL = "universal"
EVALS = "evals"
TOKENIZER = "tokenizer.json"
TOKENIZER_META = "tokenizer_meta.json"
WANDB = "wandb"
WANDB_ID = "wandb_id"
LOCK = ".lock"
TRAIN_LOG = "train.log"
REQUEUES = "requeues.jsonl"
RANKS = "ranks.json"

# A folder holding any of these is a run directory; its subfolders are its own.
MARKERS = (CONFIG, SUMMARY, METRICS, LAUNCH_CONFIG)
# Folders a walk for run directories never enters (a sweep's own bookkeeping included).
SKIP_DIRS = {CHECKPOINTS, WANDB, EVALS, ".sweep", "__pycache__", "data"}


def checkpoint_tag(step: int) -> str:
    return f"{CHECKPOINT_PREFIX}{step}"


def checkpoint_step(name: str) -> int | None:
    """N of a `step_<N>` name, None for any other name."""
    if not name.startswith(CHECKPOINT_PREFIX):
        return None
    try:
        return int(name[len(CHECKPOINT_PREFIX) :])
    except ValueError:
        return None


def eval_name(step: int) -> str:
    return f"{step}.json"


def eval_step(name: str) -> int | None:
    """The step of an `evals/<step>.json` name, None for any other name."""
    stem = name.removesuffix(".json")
    return int(stem) if name.endswith(".json") and stem.isdigit() else None


class RunDir:
    """The paths of one run directory (nothing is read or created here)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    config = property(lambda self: self.path / CONFIG)
    launch_config = property(lambda self: self.path / LAUNCH_CONFIG)
    metrics = property(lambda self: self.path / METRICS)
    summary = property(lambda self: self.path / SUMMARY)
    checkpoints = property(lambda self: self.path / CHECKPOINTS)
    evals = property(lambda self: self.path / EVALS)
    tokenizer = property(lambda self: self.path / TOKENIZER)
    tokenizer_meta = property(lambda self: self.path / TOKENIZER_META)
    wandb = property(lambda self: self.path / WANDB)
    wandb_id = property(lambda self: self.path / WANDB_ID)
    lock = property(lambda self: self.path / LOCK)
    train_log = property(lambda self: self.path / TRAIN_LOG)
    requeues = property(lambda self: self.path / REQUEUES)

    def checkpoint(self, step: int) -> Path:
        return self.checkpoints / checkpoint_tag(step)

    def eval_file(self, step: int) -> Path:
        return self.evals / eval_name(step)
