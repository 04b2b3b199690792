"""No training start waits forever on a C++ extension build lock (a build killed mid-way leaves
torch's lock file behind; DeepSpeed used to build its CPU comm op on every start and wait on it)."""

from __future__ import annotations

import pytest

from pretrain.engine import extensions


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
