"""Shared fixtures: one prepared copy of the real corpus per session, and a CLI runner."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def data_root() -> Path | None:
    root = Path(os.environ.get("SCALELAB_DATA_ROOT", REPO.parent / "shared" / "data"))
    return root if (root / "corpus").exists() else None


requires_corpus = pytest.mark.skipif(data_root() is None, reason="bundled corpus not found (set SCALELAB_DATA_ROOT)")

SCALELAB = [sys.executable, "-m", "launch.cli"]


def run_cli(args: list[str], cwd: Path, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run(SCALELAB + args, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """The default corpus prepared once with a 512-token BPE (shared by every training test)."""
    if data_root() is None:
        pytest.skip("bundled corpus not found (set SCALELAB_DATA_ROOT)")
    from pretrain.config.loader import load_data_config
    from pretrain.data.prepare import prepare

    out = tmp_path_factory.mktemp("data") / "tiny512"
    cfg = load_data_config(REPO / "configs/data/default.yaml", ["tokenizer.vocab_size=512", f"out_dir={out}", "name=tiny512"])
    prepare(cfg, log=lambda m: None)
    return out


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
