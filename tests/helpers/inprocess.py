"""`scalelab ARGS` run inside the test process: `launch.cli.main(argv)` with its own working
directory, environment, stdout/stderr and exit code, and everything it may change put back after.

A new process pays Python's start-up and, for a command that trains, torch's and DeepSpeed's
imports (seconds each on the 2-core CI machine); in process they are paid once per test worker.
Tests that need a process of their own (signals, kill -9, several ranks, the DeepSpeed launcher,
what a fresh interpreter imports) ask for one: `scalelab(..., process=True)`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)


@contextlib.contextmanager
def isolated(cwd: Path, env: dict | None = None, unset=()):
    """Run a block as if it were a fresh `scalelab` process: working directory, environment,
    signal handlers, torch's thread count and F.linear restored afterwards."""
    old_cwd, old_env = os.getcwd(), dict(os.environ)
    handlers = {s: signal.getsignal(s) for s in _SIGNALS}
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    # ZeRO-3's zero.Init swaps in its own F.linear "until manually reset" (one run per process in use)
    linear = torch.nn.functional.linear if torch is not None else None
    os.environ.update({k: str(v) for k, v in (env or {}).items()})
    for k in unset:
        os.environ.pop(k, None)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)
        for s, h in handlers.items():
            signal.signal(s, h)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(threads or 1)
            if linear is not None:
                torch.nn.functional.linear = linear
        # A finished trainer's engine and buffers, freed before the next test builds its own. Then what is still
        # alive (torch, DeepSpeed, lm-eval: ~500K objects once imported) is frozen out of the collector's scans:
        # a full collection over it took 0.2-0.5 s per command, hundreds of times a session. The next collection
        # scans only what later commands make. (A frozen object that later becomes cyclic garbage is never freed:
        # a small leak per test worker, taken for the time.)
        gc.collect()
        gc.freeze()


@contextlib.contextmanager
def captured():
    """Both the process's stdout/stderr file descriptors and Python's streams into temporary files,
    as a pipe would: what the command prints and what the processes it starts print land in one
    stream, in order. Yields a dict that holds `out` and `err` once the block is left."""
    result: dict[str, str] = {}
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    files = {fd: tempfile.TemporaryFile() for fd in (1, 2)}
    streams = sys.stdout, sys.stderr
    try:
        for fd, f in files.items():
            os.dup2(f.fileno(), fd)
        sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
        sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
        yield result
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = streams
        for fd, old in saved.items():
            os.dup2(old, fd)
            os.close(old)
        for fd, f in files.items():
            f.seek(0)
            result["out" if fd == 1 else "err"] = f.read().decode("utf-8", errors="replace")
            f.close()


def run(argv: list[str], cwd: Path, env: dict | None = None, unset=()) -> subprocess.CompletedProcess:
    """`scalelab ARGV` in this process; the result looks like `subprocess.run(..., text=True)`'s."""
    from launch.cli import main

    with isolated(cwd, env, unset), captured() as out:
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse errors, explicit exits
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
                code = 1
            else:
                code = int(exc.code or 0)
        except BrokenPipeError:
            code = 0
    return subprocess.CompletedProcess(["scalelab", *argv], code, out["out"], out["err"])
