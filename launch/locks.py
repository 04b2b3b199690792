"""One lock per run: `fcntl.flock` on `<run_dir>/.lock`, held by whoever trains the run.

flock locks belong to the open file, so the launcher can take the lock and hand the file
descriptor to the trainer subprocess (`pass_fds`): the lock then lives exactly as long as either
process, is released by the kernel when both die (kill -9, node reboot), and two launches of the
same sweep can never train the same run at once. `release()` therefore only closes the
launcher's descriptor and never unlocks explicitly: an explicit `LOCK_UN` would drop the lock for
the trainer too while it still trains (a Ctrl-C'd launcher must not free a running run).

The holder writes who it is into the file as one JSON line (`Holder`): host, pid, the process's
start time in clock ticks since boot and the boot id (so a pid reused by another process is
never mistaken for the holder), its role, the Slurm job if any, and the trainer pids it started.
Correctness of the lock never depends on this record; `sweep status` shows it and local cancel
signals only a process it can prove is still the holder.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

LOCK_NAME = ".lock"


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def proc_start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22); None if gone/unknown."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(data.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def slurm_task() -> str | None:
    """This process's Slurm job as scancel names it (`<array job>_<task>` or `<job>`), or None."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    if job:
        return f"{job}_{os.environ.get('SLURM_ARRAY_TASK_ID')}"
    return os.environ.get("SLURM_JOB_ID")


@dataclass
class Proc:
    pid: int
    start_ticks: int | None = None

    @classmethod
    def here(cls, pid: int) -> "Proc":
        return cls(pid, proc_start_ticks(pid))


@dataclass
class Holder:
    """Who holds a run's lock, as the holder recorded it."""

    host: str
    pid: int
    since: float = 0.0
    start_ticks: int | None = None
    boot_id: str | None = None
    role: str = ""
    slurm_job: str | None = None
    trainers: list[Proc] = field(default_factory=list)

    def describe(self) -> str:
        if self.host == "?":
            return "an unknown process (no readable record in the lock file)"
        where = f"{self.host} pid {self.pid}"
        if self.slurm_job:
            where += f" (Slurm job {self.slurm_job})"
        return where

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def parse(cls, text: str) -> "Holder | None":
        text = text.strip()
        if not text:
            return None
        if text.startswith("{"):
            try:
                d = json.loads(text.splitlines()[0])
                d["trainers"] = [Proc(**p) for p in d.get("trainers") or []]
                return cls(**d)
            except (json.JSONDecodeError, TypeError, KeyError):
                return None
        parts = text.split()  # older format "host pid time": no identity, never signalled
        try:
            return cls(host=parts[0], pid=int(parts[1]), since=float(parts[2]) if len(parts) > 2 else 0.0)
        except (IndexError, ValueError):
            return None

    def is_live_here(self, proc: Proc | None = None) -> bool:
        """True only if `proc` (default: the holder itself) is provably the same process, alive on
        this machine: same host and boot, and the pid's start time equals the recorded one."""
        proc = proc or Proc(self.pid, self.start_ticks)
        if self.host != socket.gethostname() or proc.start_ticks is None:
            return False
        boot = _boot_id()
        if self.boot_id is None or boot is None or boot != self.boot_id:
            return False
        return proc_start_ticks(proc.pid) == proc.start_ticks


class RunLock:
    def __init__(self, run_dir: str | Path, role: str = "", slurm_job: str | None = None):
        """`slurm_job`: the Slurm task this holder runs as (cancel then goes through scancel only);
        given explicitly, since a local launch inside an interactive allocation is no Slurm task."""
        self.path = Path(run_dir) / LOCK_NAME
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
        self.holder = Holder(host=socket.gethostname(), pid=me, since=round(time.time(), 3), start_ticks=proc_start_ticks(me),
                             boot_id=_boot_id(), role=self.role, slurm_job=self.slurm_job)
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


def read_holder(run_dir: str | Path) -> Holder | None:
    """The holder record in the lock file (meaningful only while `is_locked`)."""
    try:
        return Holder.parse((Path(run_dir) / LOCK_NAME).read_text())
    except (OSError, UnicodeDecodeError):
        return None


def holder_if_locked(run_dir: str | Path) -> Holder | None:
    """Who holds the run now, or None when nobody does (an unknown holder reads as host '?')."""
    if not is_locked(run_dir):
        return None
    return read_holder(run_dir) or Holder(host="?", pid=0)
