"""Warm start for a launch's CPU runs: one process imports the trainer, each run is a fork of it.

A new trainer process spends ~5 s importing torch, torch._dynamo and DeepSpeed before its first
step (on the 2-core CI machine; a tiny run then trains for 1-2 s). `WarmStarter` starts
`launch.run.warm_server` when the launch begins, so its imports overlap the launch's own work, and
hands it each run: the argv, environment and working directory a new process would get, with
the run's log and lock descriptors. The child it forks is the trainer (see the server's
docstring for what it keeps of a new process); `WarmProc` is its handle with the parts of
`subprocess.Popen` the local executor uses (pid, poll, wait, returncode).

If the server cannot start (an import fails, it dies), `start` returns None and the caller starts
the trainer as a new process. If it dies while trainers run, they go on (their own sessions);
each one's exit is then read from its run directory once it is gone (done 0, preempted 3,
failed 1, nothing written: -9, killed).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from launch.run.warm_server import GROUP_SIGNALS
from rundir.lock import proc_start_ticks, proc_stat
from rundir.summary import read_summary

READY_TIMEOUT_S = 300.0  # the imports under a loaded machine, with margin
REPLY_TIMEOUT_S = 60.0
EXIT_BY_STATUS = {"done": 0, "preempted": 3, "failed": 1}


class WarmStarter:
    def __init__(self, env: dict):
        """Start the server now with `env` (the CPU slots' environment: what its imports see)."""
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "launch.run.warm_server", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env={**env, "PYTHONUNBUFFERED": "1"},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        finally:
            theirs.close()
        self.ready = False
        self.why: str | None = None  # why it cannot start runs (None while it can)
        self.exits: dict[int, int] = {}

    # ----------------------------------------------------------------- messages
    def _take(self, msg: dict) -> dict | None:
        """File an exit or the readiness; return any other message (a reply) to the caller."""
        if "exit" in msg:
            self.exits[int(msg["exit"])] = int(msg["code"])
        elif "ready" in msg:
            self.ready = True
        elif "error" in msg and not self.ready:
            self.why = f"its imports failed: {msg['error'].strip().splitlines()[-1]}"
        else:
            return msg
        return None

    def _recv(self, timeout: float | None) -> dict | None:
        """One message within `timeout` seconds (0: only one already waiting), else None."""
        if self.why is not None:
            return None
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 20)
        except (BlockingIOError, TimeoutError):
            return None
        except OSError as exc:
            data, why = b"", str(exc)
        else:
            why = "it exited"
        if not data:
            code = self.proc.poll()
            self.why = why + (f" (code {code})" if code is not None else "")
            return None
        return json.loads(data)

    def drain(self) -> None:
        while (msg := self._recv(0)) is not None:
            self._take(msg)

    def _reply(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while self.why is None and (left := deadline - time.monotonic()) > 0:
            msg = self._recv(left)
            if msg is not None and (reply := self._take(msg)) is not None:
                return reply
        return None

    # ----------------------------------------------------------------- runs
    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> bool:
        deadline = time.monotonic() + timeout
        while not self.ready and self.why is None and (left := deadline - time.monotonic()) > 0:
            msg = self._recv(left)
            if msg is not None:
                self._take(msg)
        if not self.ready and self.why is None:
            self.why = f"not ready after {timeout:.0f}s"
        return self.ready and self.why is None

    def start(self, argv: list[str], env: dict, cwd: str, log_fd: int, lock_fd: int, run_dir: Path):
        """The trainer for `argv` (`python -m pretrain.cli ...`) as a fork of the server, or None
        (then `self.why` says why) when the server cannot start it."""
        if not self.wait_ready():
            return None
        # signals the launcher ignores stay ignored in a process it starts (exec keeps SIG_IGN)
        ignored = [int(s) for s in GROUP_SIGNALS if signal.getsignal(s) == signal.SIG_IGN]
        req = {"argv": argv[3:], "env": env, "cwd": cwd, "ignored": ignored}
        try:
            socket.send_fds(self.sock, [json.dumps(req).encode()], [log_fd, lock_fd])
        except OSError as exc:
            self.why = f"it stopped taking runs ({exc})"
            return None
        reply = self._reply(REPLY_TIMEOUT_S)
        if reply is None or "started" not in reply:
            self.why = self.why or (reply or {}).get("error") or f"no reply in {REPLY_TIMEOUT_S:.0f}s"
            return None
        return WarmProc(self, int(reply["started"]), Path(run_dir))

    def close(self) -> None:
        """Let the server go (it exits when its end of the socket closes); running trainers go on."""
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class WarmProc:
    """A forked trainer, as far as the local executor uses a `subprocess.Popen`."""

    def __init__(self, starter: WarmStarter, pid: int, run_dir: Path):
        self.starter, self.pid, self.run_dir = starter, pid, run_dir
        self.start_ticks = proc_start_ticks(pid)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.starter.drain()
            code = self.starter.exits.pop(self.pid, None)
            if code is None and self.starter.why is not None and not self._alive():
                status = (read_summary(self.run_dir) or {}).get("status")
                code = EXIT_BY_STATUS.get(status, -9)  # the server that would have told us is gone
            self.returncode = code
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"trainer pid {self.pid}", timeout)
            time.sleep(0.05)
        return self.returncode

    def _alive(self) -> bool:
        """Still running: the same process (start time) and not a zombie waiting for a reaper."""
        fields = proc_stat(self.pid)
        return fields is not None and fields[0] != "Z" and int(fields[19]) == self.start_ticks
