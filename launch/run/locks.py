"""One lock per run: `fcntl.flock` on `<run_dir>/.lock`, held by whoever trains the run.

flock locks belong to the open file, so the launcher can take the lock and hand the file
descriptor to the trainer subprocess (`pass_fds`): the lock then lives exactly as long as either
process, is released by the kernel when both die (kill -9, node reboot), and two launches of the
same sweep can never train the same run at once. `release()` therefore only closes the
launcher's descriptor and never unlocks explicitly: an explicit `LOCK_UN` would drop the lock for
the trainer too while it still trains (a Ctrl-C'd launcher must not free a running run).

The holder record written into the file, and the probes that read it (`is_locked`,
`holder_if_locked`), are part of the run-directory contract: `rundir.lock`.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from pathlib import Path

from rundir.layout import LOCK
from rundir.lock import Holder, Proc, boot_id, proc_start_ticks


def slurm_task() -> str | None:
    """This process's Slurm job as scancel names it (`<array job>_<task>` or `<job>`), or None."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    if job:
        return f"{job}_{os.environ.get('SLURM_ARRAY_TASK_ID')}"
    return os.environ.get("SLURM_JOB_ID")


class RunLock:
    def __init__(self, run_dir: str | Path, role: str = "", slurm_job: str | None = None):
        """`slurm_job`: the Slurm task this holder runs as (cancel then goes through scancel only);
        given explicitly, since a local launch inside an interactive allocation is no Slurm task."""
        self.path = Path(run_dir) / LOCK
        self.fd: int | None = None
        self.role = role
        self.slurm_job = slurm_job
        self.holder: Holder | None = None

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
        self.fd = fd
        me = os.getpid()
        self.holder = Holder(
            host=socket.gethostname(),
            pid=me,
            since=round(time.time(), 3),
            start_ticks=proc_start_ticks(me),
            boot_id=boot_id(),
            role=self.role,
            slurm_job=self.slurm_job,
        )
        self._write()
        return True

    def add_trainers(self, pids: list[int]) -> None:
        """Record the trainer processes started under this lock (local cancel may signal them)."""
        if self.holder is not None and self.fd is not None:
            self.holder.trainers += [Proc.here(p) for p in pids]
            self._write()

    def _write(self) -> None:
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, (self.holder.to_json() + "\n").encode(), 0)

    def release(self) -> None:
        """Close our descriptor. No LOCK_UN: a trainer that inherited it keeps the run locked until it exits."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        if not self.acquire():
            raise BlockingIOError(f"{self.path.parent} is locked by another launch")
        return self

    def __exit__(self, *exc) -> None:
        self.release()
