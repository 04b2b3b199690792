"""One lock per run: `fcntl.flock` on `<run_dir>/.lock`, held by whoever trains the run.

flock locks belong to the open file, so the launcher can take the lock and hand the file
descriptor to the trainer subprocess (`pass_fds`): the lock then lives exactly as long as either
process, is released by the kernel when both die (kill -9, node reboot), and two launches of the
same sweep can never train the same run at once. The holder's pid/host is written into the file
for humans; correctness never depends on it.
"""
from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from pathlib import Path

LOCK_NAME = ".lock"


class RunLock:
    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / LOCK_NAME
        self.fd: int | None = None

    def acquire(self, wait_s: float = 1.0) -> bool:
        """Try for up to `wait_s` (a status probe may hold it for microseconds); False if busy."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    os.close(fd)
                    raise
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, f"{socket.gethostname()} {os.getpid()} {time.time():.0f}\n".encode())
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None

    def __enter__(self) -> "RunLock":
        if not self.acquire():
            raise BlockingIOError(f"{self.path.parent} is locked by another launch")
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def is_locked(run_dir: str | Path) -> bool:
    """True while some process holds the run's lock (shared probe: never blocks a holder long)."""
    path = Path(run_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
