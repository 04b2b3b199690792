"""The warm starter's process: imports the trainer once, then forks one trainer per run it is handed.

`python -m launch.run.warm_server FD` (started by `launch.run.warm_start`; FD is its end of a Unix
socket pair). A trainer started as a new process spends ~5 s (on the 2-core CI machine) importing
torch, torch._dynamo and DeepSpeed before it trains; a sweep of small CPU runs pays that per run.
This process pays it once per launch and forks a child per run that is what a new
`python -m pretrain.cli ARGS` would be: its own session and process group, the run's log as
stdout and stderr, /dev/null as stdin, the run's environment and working directory, the signal
dispositions a new process would start with (default, or ignored where the launcher ignores the
signal), and of the launcher's descriptors only the run lock's. CUDA is never initialised
here (the launcher uses it for CPU runs only), and no torch operation runs before the fork, so
the child's OpenMP threads start fresh.

Messages (one JSON object per datagram): in, {"argv", "env", "cwd", "ignored"} with the log's and the lock's
descriptors attached; out, {"ready"} or {"error"} once after the imports, {"started": pid} or
{"error"} per request, and {"exit": pid, "code": c} (Popen's returncode convention) as each child
ends. The server ends when the launcher's end closes; children it started go on (as a trainer
does today when its launcher is killed) and keep their runs' locks until they exit.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import traceback

# What `pretrain.cli` imports on the way to its first step (torch._dynamo comes in with
# torch.use_deterministic_algorithms and torch.optim), besides what it imports at module level.
PRELOAD = (
    "torch",
    "torch._dynamo",
    "torch.optim",
    "deepspeed",
    "pretrain.cli",
    "pretrain.callbacks.signals",
    "pretrain.config.loader",
    "pretrain.data.prepare",  # tokenizers: imported only, no thread pool started before the fork
    "pretrain.data.mixture",
    "pretrain.checkpoint.evaluators",
    "pretrain.engine.trainer",
)
MAX_MSG = 1 << 20
# Set to "ignore" while the server waits, so that a Ctrl-C or a SIGTERM to the launcher's process
# group leaves it to the launcher (which forwards a stop to each trainer and still needs its exits).
GROUP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP)


def send(sock: socket.socket, msg: dict) -> None:
    try:
        sock.send(json.dumps(msg).encode())
    except OSError:
        pass  # the launcher is gone: its trainers go on without it


def preload() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)


def child(req: dict, log_fd: int, lock_fd: int, sock: socket.socket, ready_w: int) -> None:
    """In the forked child: become the new trainer process `req` describes, run it and exit."""
    os.setsid()
    for s in GROUP_SIGNALS:  # what a new Python started by the launcher now would have
        if int(s) in req.get("ignored", ()):
            signal.signal(s, signal.SIG_IGN)  # ignored there (nohup, a background job): kept across exec
        else:
            signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
    sock.close()
    os.write(ready_w, b"1")  # the launcher may signal our process group from now on
    os.close(ready_w)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(null)
    os.close(log_fd)
    code = 1
    try:
        os.set_inheritable(lock_fd, True)  # as pass_fds leaves it in a new process
        os.environ.clear()
        os.environ.update(req["env"])
        os.environ["SCALELAB_RUN_LOCK_FD"] = str(lock_fd)  # its number here, not in the launcher
        os.chdir(req["cwd"])
        argv = req["argv"]
        import pretrain.cli as cli

        sys.argv = [cli.__file__, *argv]
        code = cli.main(argv)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
    finish(int(code or 0))


def finish(code: int) -> None:
    """End the child as `pretrain.engine.distributed.exit_process` ends a rank: the exit hooks (W&B,
    logging) and flushed streams, then no interpreter teardown of the state it shares with the server."""
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def start(sock: socket.socket, req: dict, fds: list[int]) -> None:
    log_fd, lock_fd = fds
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        try:
            child(req, log_fd, lock_fd, sock, ready_w)
        finally:
            os._exit(1)
    os.close(ready_w)
    for fd in fds:
        os.close(fd)
    ok = os.read(ready_r, 1)  # its session exists once this returns (or it died before)
    os.close(ready_r)
    send(sock, {"started": pid} if ok else {"started": pid, "warning": "exited before it started"})


def reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def serve(sock: socket.socket) -> None:
    while True:
        readable, _, _ = select.select([sock], [], [], 0.05)
        reap(sock)
        if not readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_MSG, 2)
        except OSError:
            return
        if not data:
            for fd in fds:
                os.close(fd)
            return  # the launcher closed its end (or died)
        try:
            req = json.loads(data)
            if len(fds) != 2:
                raise ValueError(f"expected the log's and the lock's descriptors, got {len(fds)}")
            start(sock, req, fds)
        except Exception as exc:  # one bad request must not take the other runs' exits with it
            send(sock, {"error": f"{type(exc).__name__}: {exc}"})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sock = socket.socket(fileno=int(argv[0]))
    for s in GROUP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    try:
        preload()
    except BaseException:
        send(sock, {"error": traceback.format_exc(limit=-3)})
        return 1
    send(sock, {"ready": os.getpid()})
    serve(sock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
