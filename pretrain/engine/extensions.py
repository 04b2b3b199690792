"""DeepSpeed's JIT-built C++ ops, set up so that no start can wait forever on a build lock.

torch.utils.cpp_extension builds an op under a lock file (`<extensions dir>/<op>/lock`, torch's
FileBaton); a process killed during the build (scancel in a sweep's first minute) leaves the file
behind, and every later build of that op waits on it forever, silently. Three defences:

- DeepSpeed builds its shared-memory CPU op (`deepspeed_shm_comm`) on every `init_distributed`,
  but only its inference all-reduce (AutoTP inference) uses it; training all-reduces through
  torch.distributed. scalelab marks the op unavailable, so no run builds it or touches its lock.
- Ops that are still built (e.g. a GPU fused optimizer) go to a per-environment directory
  (TORCH_EXTENSIONS_DIR under the virtual environment unless set), so two checkouts with different
  environments never rebuild one another's ops in the shared ~/.cache.
- A wait on a build lock ends after SCALELAB_EXTENSION_LOCK_TIMEOUT_S (default 600 s) with an
  error naming the lock file.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

from pretrain.errors import ConfigError

SHM_OP = "deepspeed_shm_comm"
LOCK_TIMEOUT_ENV = "SCALELAB_EXTENSION_LOCK_TIMEOUT_S"
DEFAULT_LOCK_TIMEOUT_S = 600.0


class ExtensionLockTimeout(RuntimeError):
    """A C++ extension build lock stayed taken longer than the timeout."""


def extensions_dir() -> Path:
    """This Python environment's own extensions directory: inside the venv when it is writable,
    else a folder of ~/.cache/torch_extensions named by a hash of the environment's prefix."""
    prefix = Path(sys.prefix)
    if os.access(prefix, os.W_OK):
        return prefix / "var" / "torch_extensions"
    tag = hashlib.sha1(str(prefix.resolve()).encode()).hexdigest()[:12]
    return Path.home() / ".cache" / "torch_extensions" / f"scalelab-{tag}"


def lock_timeout_s() -> float:
    raw = os.environ.get(LOCK_TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_LOCK_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ConfigError(f"{LOCK_TIMEOUT_ENV}={raw!r} must be a positive number of seconds")
    return value


def bound_lock_waits(timeout_s: float) -> None:
    """Make torch's FileBaton.wait give up after `timeout_s` with an error naming the lock file."""
    from torch.utils.file_baton import FileBaton  # deferred: imports torch

    def wait(self) -> None:
        deadline = time.monotonic() + timeout_s
        while os.path.exists(self.lock_file_path):
            if time.monotonic() > deadline:
                raise ExtensionLockTimeout(
                    f"waited {timeout_s:.0f}s on the C++ extension build "
                    f"lock {self.lock_file_path}: another process is "
                    f"building this op, or a build was killed and left the lock behind. If no build is running, delete "
                    f"that file and start again ({LOCK_TIMEOUT_ENV} sets the wait)."
                )
            time.sleep(self.wait_seconds)

    FileBaton.wait = wait


def skip_shm_comm_op() -> None:
    """Tell DeepSpeed its shared-memory CPU op is unavailable: init_distributed then neither builds
    nor loads it (training never calls the inference all-reduce that uses it)."""
    import deepspeed.ops  # deferred: imports deepspeed

    deepspeed.ops.__compatible_ops__[SHM_OP] = False


def configure() -> None:
    """Call before deepspeed.init_distributed."""
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(extensions_dir()))
    bound_lock_waits(lock_timeout_s())
    skip_shm_comm_op()
