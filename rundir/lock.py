"""Who holds a run's lock: the record in `<run_dir>/.lock` and a probe that never blocks a holder.

The lock itself (`fcntl.flock` on the file, taken by the launch that trains the run) is
`launch.run.locks.RunLock`. The holder writes who it is into the file as one JSON line (`Holder`):
host, pid, the process's start time in clock ticks since boot and the boot id (so a pid reused
by another process is never mistaken for the holder), its role, the Slurm job if any, and the
trainer pids it started. Correctness of the lock never depends on this record; `sweep status`
and the dashboard show it, and local cancel signals only a process it can prove is the holder.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rundir.layout import LOCK


def boot_id() -> str | None:
    """This boot's id (a pid is only meaningful within one boot)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state at [0], process group at [2], start time
    at [19]); None if the process is gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return data.rsplit(")", 1)[1].split()


def proc_start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22); None if gone/unknown."""
    try:
        fields = proc_stat(pid)
        return int(fields[19]) if fields is not None else None
    except (TypeError, IndexError, ValueError):
        return None


@dataclass
class Proc:
    pid: int
    start_ticks: int | None = None

    @classmethod
    def here(cls, pid: int) -> Proc:
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
    def parse(cls, text: str) -> Holder | None:
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
        boot = boot_id()
        if self.boot_id is None or boot is None or boot != self.boot_id:
            return False
        return proc_start_ticks(proc.pid) == proc.start_ticks


def is_locked(run_dir: str | Path) -> bool:
    """True while some process holds the run's lock (shared probe: never blocks a holder long)."""
    path = Path(run_dir) / LOCK
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
        return Holder.parse((Path(run_dir) / LOCK).read_text())
    except (OSError, UnicodeDecodeError):
        return None


def holder_if_locked(run_dir: str | Path) -> Holder | None:
    """Who holds the run now, or None when nobody does (an unknown holder reads as host '?')."""
    if not is_locked(run_dir):
        return None
    return read_holder(run_dir) or Holder(host="?", pid=0)
