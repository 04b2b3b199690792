"""Data the tests train on: the bundled corpus (or a skip), its tiny prepared form, tiny model
overrides, and sweep folders (a base config and a spec) over a shared prepared data set."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def data_root() -> Path | None:
    root = Path(os.environ.get("SCALELAB_DATA_ROOT", REPO.parent / "shared" / "data"))
    return root if (root / "corpus").exists() else None


requires_corpus = pytest.mark.skipif(data_root() is None, reason="bundled corpus not found (set SCALELAB_DATA_ROOT)")


def tiny_overrides(data_dir: Path, **extra) -> list[str]:
    """A ~50K-parameter model that takes well under a second per step on one core."""
    base = {
        "model": "n50k",
        "model.seq_len": 64,
        "data.tokenizer.vocab_size": 512,
        "data.name": "tiny512",
        "data.out_dir": str(data_dir),
        "train.tokens": None,
        "train.steps": 24,
        "train.micro_batch_size": 8,
        "train.global_batch_size": 8,
        "train.log_every_steps": 1,
        "train.eval_every_steps": 12,
        "train.eval_tokens": 2048,
        "train.checkpoint_every_steps": 6,
        "train.threads": 1,
        "wandb.mode": "disabled",
    }
    base.update(extra)
    return [f"{k}={'null' if v is None else v}" for k, v in base.items()]


def epoch_csv() -> Path:
    """Epoch AI's extraction of the Chinchilla paper's points (the shared data), or skip."""
    p = (
        Path(os.environ.get("SCALELAB_DATA_ROOT", REPO.parent / "shared" / "data"))
        / "scaling"
        / "epoch_chinchilla_svg_extracted.csv"
    )
    if not p.exists():
        pytest.skip(f"Epoch Chinchilla data not found at {p} (set SCALELAB_DATA_ROOT to the shared data folder)")
    return p


# Sweep tests work in their own temp dirs (`work`) rather than pytest's tmp_path: Slurm jobs outlive
# a test's bookkeeping, and concurrent pytest sessions on a shared machine prune each other's basetemps.
# One tiny prepared data set (vocab 512, TinyShakespeare only) is built once under SHARED and reused
# by every module and session (`prepare` caches by fingerprint).
SHARED = Path(tempfile.gettempdir()) / f"scalelab-sweep-tests-{os.getuid()}"


def prepared_data() -> Path:
    from pretrain.config.loader import load_train_config
    from pretrain.data.prepare import prepare

    d = SHARED / "data-tv512"
    base = write_base(SHARED / "data-base", d)
    prepare(load_train_config(base).data, log=lambda m: None)
    return d


def write_base(folder: Path, data: Path, **train) -> Path:
    """A tiny sweep base on TinyShakespeare (0.57M tokens). Its runs repeat that corpus as long as a test
    needs them to run (a run to cancel, to preempt): train.max_epochs_warn is off unless a test sets it
    (the repetition check has its own tests: tests/integration/launch/test_sweep_epochs.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {
        "model": {"preset": "n50k", "seq_len": 64},
        "data": {
            "name": "tv512",
            "sources": ["corpus/tinyshakespeare.txt"],
            "tokenizer": {"kind": "bpe", "vocab_size": 512},
            "out_dir": str(data),
        },
        "optim": {"lr": 3e-3},
        "schedule": {"name": "cosine", "warmup_steps": 2},
        "train": {
            "steps": 12,
            "micro_batch_size": 4,
            "global_batch_size": 4,
            "log_every_steps": 2,
            "eval_every_steps": 0,
            "eval_tokens": 512,
            "checkpoint_every_steps": 4,
            "max_epochs_warn": None,
            **train,
        },
        "deepspeed": {"zero_stage": 0},
        "wandb": {"mode": "disabled"},
    }
    path = folder / "base.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def write_spec(folder: Path, spec: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
