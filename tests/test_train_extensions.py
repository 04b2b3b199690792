"""No training start waits forever on a C++ extension build lock (a build killed mid-way leaves
torch's lock file behind; DeepSpeed used to build its CPU comm op on every start and wait on it)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import REPO, run_cli, tiny_overrides
from pretrain import extensions

TINY = str(REPO / "configs/train/tiny.yaml")


def test_stale_build_lock_does_not_hang_train(tiny_data, tmp_path):
    ext = tmp_path / "ext"
    lock = ext / extensions.SHM_OP / "lock"  # where torch's FileBaton takes it for DeepSpeed's op
    lock.parent.mkdir(parents=True)
    lock.touch()
    over = tiny_overrides(tiny_data, **{"train.steps": 2, "train.eval_every_steps": 0, "train.checkpoint_every_steps": 0})
    # before the fix this waited on the lock forever (TimeoutExpired)
    res = run_cli(["train", TINY, *over, "--run-dir", "run", "--no-progress"], tmp_path,
                  env={"TORCH_EXTENSIONS_DIR": str(ext)}, timeout=240)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert (tmp_path / "run" / "summary.json").exists()
    assert lock.exists()  # somebody else's lock is never deleted


def test_lock_wait_times_out_naming_the_lock(tmp_path, monkeypatch):
    from torch.utils.file_baton import FileBaton

    monkeypatch.setattr(FileBaton, "wait", FileBaton.wait)  # restored after the test
    lock = tmp_path / "op" / "lock"
    lock.parent.mkdir()
    lock.touch()
    extensions.bound_lock_waits(0.3)
    with pytest.raises(extensions.ExtensionLockTimeout, match=str(lock)):
        FileBaton(str(lock), wait_seconds=0.05).wait()
    lock.unlink()
    FileBaton(str(lock)).wait()  # a released lock returns at once


def test_extensions_dir_is_per_environment(monkeypatch):
    import sys

    d = extensions.extensions_dir()
    assert str(d).startswith(sys.prefix) or d.name.startswith("scalelab-")
    monkeypatch.setenv(extensions.LOCK_TIMEOUT_ENV, "soon")
    from pretrain.errors import ConfigError

    with pytest.raises(ConfigError, match=extensions.LOCK_TIMEOUT_ENV):
        extensions.lock_timeout_s()
