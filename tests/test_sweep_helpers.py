"""Shared helpers for the sweep/registry/Slurm tests (no tests here).

One tiny prepared data set (vocab 512, TinyShakespeare only), built once under the system temp
dir and reused by every module and session (`prepare` caches by fingerprint). Tests work in
their own temp dirs (`work` fixture) rather than pytest's tmp_path: Slurm jobs outlive a test's
bookkeeping, and concurrent pytest sessions on a shared machine prune each other's basetemps."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import shutil
import tempfile

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")


SHARED = Path(tempfile.gettempdir()) / f"scalelab-sweep-tests-{os.getuid()}"


@pytest.fixture()
def work():
    SHARED.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="run-", dir=SHARED))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def prepared_data(_factory=None) -> Path:
    from pretrain.config.loader import load_train_config
    from pretrain.data.prepare import prepare

    d = SHARED / "data-tv512"
    base = write_base(SHARED / "data-base", d)
    prepare(load_train_config(base).data, log=lambda m: None)
    return d


def write_base(folder: Path, data: Path, **train) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {
        "model": {"preset": "n50k", "seq_len": 64},
        "data": {"name": "tv512", "sources": ["corpus/tinyshakespeare.txt"],
                 "tokenizer": {"kind": "bpe", "vocab_size": 512}, "out_dir": str(data)},
        "optim": {"lr": 3e-3},
        "schedule": {"name": "cosine", "warmup_steps": 2},
        "train": {"steps": 12, "micro_batch_size": 4, "global_batch_size": 4, "log_every_steps": 2,
                  "eval_every_steps": 0, "eval_tokens": 512, "checkpoint_every_steps": 4, **train},
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


def scalelab(*args, cwd=None, timeout=600, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launch.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def metrics_steps(run_dir: Path) -> list[int]:
    return [json.loads(ln)["step"] for ln in (run_dir / "metrics.jsonl").read_text().splitlines() if ln.strip()]


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def complete_checkpoint(run_dir: Path, min_step: int = 1) -> int | None:
    """The newest complete checkpoint at or after `min_step` (None: none yet). Waiting for one named
    step races with pruning (keep_checkpoints) when the machine is quiet and steps take milliseconds."""
    steps = [int(p.parent.name[5:]) for p in (Path(run_dir) / "checkpoints").glob("step_*/COMPLETE")]
    steps = [s for s in steps if s >= min_step]
    return max(steps) if steps else None
