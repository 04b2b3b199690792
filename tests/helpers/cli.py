"""The `scalelab` CLI from a test: in this process by default (tests/helpers/inprocess.py), in a
process of its own where the test needs one (signals, kill -9, what a fresh interpreter imports),
and waiting on a training process's progress."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCALELAB = [sys.executable, "-m", "launch.cli"]


def load_script(rel: str, name: str | None = None):
    """A script outside the packages (benchmarks/X.py, .ci/X.py) imported as a module, for its functions."""
    path = REPO / rel
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    assert spec is not None and spec.loader is not None, path
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cli_env(env: dict | None = None, unset=()) -> dict:
    """The environment of a `scalelab` process: this one's, unbuffered, the checkout first on
    PYTHONPATH, plus `env`, less the variables named in `unset` (benchmarks/faults.py shares it)."""
    full = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full["PYTHONPATH"] = str(REPO) + os.pathsep + full.get("PYTHONPATH", "")
    for k in unset:
        full.pop(k, None)
    return full


def scalelab(
    *args, cwd: Path | None = None, env: dict | None = None, unset=(), timeout: int = 600, process: bool = False
) -> subprocess.CompletedProcess:
    """`scalelab ARGS` to completion in `cwd` (default: the checkout); `env` adds to the environment
    and `unset` names variables to leave out. In this process (tests/helpers/inprocess.py) unless
    `process=True` or SCALELAB_TEST_PROCESSES=1: a test that needs its own process says so."""
    argv = [str(a) for a in args]
    if process or os.environ.get("SCALELAB_TEST_PROCESSES") == "1":
        return subprocess.run(
            SCALELAB + argv, cwd=cwd or REPO, env=cli_env(env, unset), capture_output=True, text=True, timeout=timeout
        )
    from tests.helpers import inprocess

    return inprocess.run(argv, Path(cwd or REPO), env, unset)


def run_cli(
    args: list, cwd: Path | None, env: dict | None = None, timeout: int = 600, process: bool = False
) -> subprocess.CompletedProcess:
    return scalelab(*args, cwd=cwd, env=env, timeout=timeout, process=process)


def spawn(cmd: list[str], cwd: Path, env: dict | None = None, unset=()) -> subprocess.Popen:
    """A command running in its own session (stdout+stderr captured), for tests that kill it."""
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        env=cli_env(env, unset),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def start(args: list, cwd: Path, env: dict | None = None, unset=()) -> subprocess.Popen:
    """`scalelab ARGS` started in its own session (see `spawn`)."""
    return spawn(SCALELAB + [str(a) for a in args], cwd, env, unset)


def wait_for_step(run: Path, step: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    """Until the run's metrics.jsonl has logged `step` (a torn last line is not read)."""
    from rundir.metrics import last_record

    t0 = time.time()
    while time.time() - t0 < timeout:
        rec = last_record(Path(run) / "metrics.jsonl")
        if rec and rec.get("step", 0) >= step:
            return
        if proc.poll() is not None:
            raise AssertionError(f"run ended early: {proc.stdout.read()[-3000:]}")
        time.sleep(0.02)
    raise AssertionError("timed out waiting for training progress")


def kill_after_step(run: Path, step: int, proc: subprocess.Popen, timeout: float = 400) -> None:
    """SIGKILL the run's whole process group once it has logged `step`."""
    wait_for_step(run, step, proc, timeout)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def children(pid: int) -> list[int]:
    """Pids of the live child processes of `pid` (read from /proc)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(p.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def holders(path: Path) -> list[str]:
    """The "pid ppid cmdline" of each live process that has `path` open (from /proc): what keeps a
    run's lock held when a test expected it free."""
    target = str(Path(path).resolve())
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) == target for fd in (p / "fd").iterdir()):
                ppid = (p / "stat").read_text().rsplit(")", 1)[1].split()[1]
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                out.append(f"{p.name} {ppid} {cmd}")
        except OSError:
            pass
    return out
