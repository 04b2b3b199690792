"""Local executor: N worker slots on this machine, one trainer subprocess per run.

Data sets the runs need that are not prepared yet are prepared first, once each, by a
`scalelab data prepare` process (`launch.sweep.data_jobs`), before any run starts.

CPU: each run gets `train.threads` = cores / workers and the same OMP_NUM_THREADS (oversubscribed
ranks run many times slower); with `warm_start` (the default) each trainer is forked from one
process that imported torch and DeepSpeed when the launch began (`launch.run.warm_start`),
instead of paying those imports (~5 s on the CI machine) once per run. GPUs: each slot gets its
own CUDA_VISIBLE_DEVICES slice. The launcher holds each run's lock and passes it to the trainer;
Ctrl-C / SIGTERM forwards SIGTERM so running trainers checkpoint and exit, and the next launch
resumes them.

A run with a parent (`after`: a WSD branch) starts once the parent's branch checkpoint is
complete (`launch.sweep.depends`); meanwhile free slots take the next run that may start. A branch
whose parent can no longer write that checkpoint (it failed, or is not part of this launch) fails
with that reason.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from launch.run.locks import RunLock
from launch.run.warm_start import WarmStarter
from launch.run.worker import (
    EXIT_OK,
    EXIT_STOPPED,
    STOP_SIGNALS,
    claim,
    start_or_skip,
    start_trainers,
    stopped_in_startup,
    train_argv,
    write_launch_config,
)
from launch.sweep import depends
from launch.sweep.data_jobs import data_jobs, run_locally
from rundir.layout import METRICS, TRAIN_LOG
from rundir.lock import is_locked
from rundir.metrics import last_record


def visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g for g in env.split(",") if g.strip() != ""]
    if not any(Path("/dev").glob("nvidia[0-9]*")):  # no NVIDIA device: skip importing torch (seconds)
        return []
    try:
        import torch  # deferred: imports torch

        return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    except Exception:
        return []


@dataclass
class Slot:
    index: int
    env: dict
    threads: int | None
    run: object = None
    proc: object = None
    lock: RunLock | None = None
    log: object = None
    started: float = 0.0


@dataclass
class LaunchResult:
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # name -> why

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else (3 if self.stopped else 0)


class LocalExecutor:
    def __init__(
        self,
        workers: int = 1,
        threads: int | None = None,
        gpus_per_run: int = 1,
        progress: bool = True,
        poll_s: float = 0.5,
        stream=None,
        meta_dir: Path | None = None,
        warm_start: bool = True,
    ):
        self.workers = max(1, workers)
        self.warm_start = warm_start
        self.warm: WarmStarter | None = None
        self.meta_dir = meta_dir  # where data jobs write their config and log (default <runs>/.sweep)
        self.gpus = visible_gpus()
        self.per_run_gpus = max(1, gpus_per_run) if self.gpus else 0
        self.stream = stream or sys.stdout
        if self.gpus:
            per = max(1, gpus_per_run)
            self.workers = max(1, min(self.workers, len(self.gpus) // per))
            self.slots = [
                Slot(i, {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus[i * per : (i + 1) * per])}, threads)
                for i in range(self.workers)
            ]
        else:
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
            t = threads or max(1, cores // self.workers)
            self.slots = [
                Slot(i, {"OMP_NUM_THREADS": str(t), "CUDA_VISIBLE_DEVICES": ""}, t) for i in range(self.workers)
            ]
        self.progress = progress
        self.poll_s = poll_s
        self._stop = False
        self._tty = self.stream.isatty()

    def _say(self, text: str) -> None:
        if self._tty:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text + "\n")
        self.stream.flush()

    def launch(self, runs: list, retry_failed: bool = False) -> LaunchResult:
        res = LaunchResult()
        queue = []
        for r in runs:
            what = start_or_skip(Path(r.run_dir), retry_failed, r.id)
            if what == "done":
                res.skipped[r.name] = "done"
            elif what == "stale":
                res.skipped[r.name] = "stale: the run dir holds another config (delete it to rerun)"
            elif what == "failed":
                res.skipped[r.name] = "failed (use --retry-failed)"
                res.failed.append(r.name)
            else:
                queue.append(r)
        if queue and self.warm_start and not self.gpus:  # its imports overlap the data preparation
            self.warm = WarmStarter({**os.environ, **self.slots[0].env})
        try:
            return self._launch(queue, res, retry_failed)
        finally:
            if self.warm is not None:
                self.warm.close()
                self.warm = None

    def _launch(self, queue: list, res: LaunchResult, retry_failed: bool) -> LaunchResult:
        if queue:
            queue = self._prepare_data(queue, res)
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._say(  # from here a stop is the launch's: trainers checkpoint, the rest wait for the next launch
                f"local executor: {len(queue)} to run, {len(res.skipped)} skipped, {len(self.slots)} workers "
                + (f"(GPUs {','.join(self.gpus)})" if self.gpus else f"({self.slots[0].threads} threads each)")
            )
            self._loop(queue, res, retry_failed)
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        if self._stop and queue:  # never started: a stopped launch (exit 3), not a finished one
            res.stopped += [r.name for r in queue]
            self._say(f"not started (stopped): {', '.join(r.name for r in queue)} (relaunch runs them)")
        return res

    def _prepare_data(self, queue: list, res: LaunchResult) -> list:
        """Prepare every data set the queued runs need, once, before they start; drop the runs whose data failed."""

        jobs = data_jobs(queue)
        if not jobs:
            return queue
        meta = (
            self.meta_dir or Path(os.path.commonpath([str(Path(r.run_dir).resolve().parent) for r in queue])) / ".sweep"
        )
        blocked = run_locally(jobs, meta, self._say)
        for r in queue:
            if r.name in blocked:
                res.failed.append(r.name)
                res.skipped[r.name] = blocked[r.name]
        return [r for r in queue if r.name not in blocked]

    def _on_signal(self, signum, frame) -> None:
        if not self._stop:
            self._say(f"{signal.Signals(signum).name}: asking running trainers to checkpoint and stop")
        self._stop = True
        for s in self.slots:
            if s.proc is not None and s.proc.poll() is None:
                try:
                    os.killpg(s.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def _start(self, slot: Slot, run, res: LaunchResult, retry_failed: bool) -> bool:
        run_dir = Path(run.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        if self.per_run_gpus > 1:  # one rank per GPU: the worker spawns them and holds the lock
            if is_locked(run_dir):
                res.skipped[run.name] = "running under another launch"
                return False

            write_launch_config(run)
            argv = [
                sys.executable,
                "-m",
                "launch.run.worker",
                str(run_dir),
                "--mode",
                "local",
                "--gpus",
                str(self.per_run_gpus),
                "--port",
                str(29500 + slot.index),
            ] + (["--retry-failed"] if retry_failed else [])
            slot.proc = subprocess.Popen(
                argv, env={**os.environ, **slot.env}, stdout=subprocess.DEVNULL, start_new_session=True
            )
            slot.run, slot.lock, slot.log, slot.started = run, None, None, time.time()
            self._say(f"start  {run.name} (slot {slot.index}, {self.per_run_gpus} GPUs) -> {run_dir / TRAIN_LOG}")
            return True
        warm = self._warm()
        lock, what = claim(run_dir, "local", retry_failed, run.id, wait_s=0.5)
        if what != "run":
            res.skipped[run.name] = "running under another launch" if what == "busy" else what
            return False
        write_launch_config(run)
        argv = train_argv(
            run_dir, overrides=[f"train.threads={slot.threads}"] if slot.threads and not self.gpus else []
        )
        how = " (forked by the warm starter)" if warm is not None else ""
        (slot.proc,), log = start_trainers(
            run_dir,
            lock,
            [(argv, {**os.environ, **slot.env})],
            f"local worker {slot.index}{how}: {' '.join(argv)}",
            warm=warm,
        )
        if warm is not None and warm.why is not None:  # it fell back to a new process: say so, once
            log.write(f"=== the warm starter {warm.why}: started as a new process instead\n".encode())
            self._warm()
        slot.run, slot.lock, slot.log, slot.started = run, lock, log, time.time()
        self._say(f"start  {run.name} (slot {slot.index}) -> {run_dir / TRAIN_LOG}")
        return True

    def _warm(self) -> WarmStarter | None:
        """The warm starter while it can start runs; once it cannot, say why and drop it."""
        if self.warm is not None and not self.warm.wait_ready():
            self._say(f"warm start off: the warm starter {self.warm.why}; trainers start as new processes")
            self.warm.close()
            self.warm = None
        return self.warm

    def _finish(self, slot: Slot, code: int, res: LaunchResult) -> None:
        name = slot.run.name
        if slot.log is not None:
            slot.log.write(f"=== trainer exit code {code}\n".encode())
            slot.log.close()
        if slot.lock is not None:
            slot.lock.release()
        took = time.time() - slot.started
        startup = self._stop and stopped_in_startup(code, STOP_SIGNALS)  # killed by our SIGTERM before its handler
        rec = last_record(Path(slot.run.run_dir) / METRICS) or {}
        loss = rec.get("loss")
        tail = f", loss {loss:.4f}" if isinstance(loss, float) else ""
        if code == EXIT_OK:
            res.done.append(name)
            self._say(f"done   {name} in {took:.0f}s{tail}")
        elif code == EXIT_STOPPED or startup:
            res.stopped.append(name)
            self._say(
                f"stopped {name} while it was starting (nothing lost; relaunch runs it)"
                if startup
                else f"stopped {name} after a checkpoint{tail} (relaunch resumes it)"
            )
        else:
            res.failed.append(name)
            self._say(f"FAILED {name} (exit {code}); see {Path(slot.run.run_dir) / TRAIN_LOG}")
        slot.run = slot.proc = slot.lock = slot.log = None

    def _next(self, queue: list):
        """The first queued run that may start now (plan order), or None."""
        for i, run in enumerate(queue):
            if depends.may_start(run):
                return queue.pop(i)
        return None

    def _orphans(self, queue: list, res: LaunchResult) -> None:
        """Fail the queued runs whose parent is neither queued nor running: their checkpoint will not come."""
        alive = {r.name for r in queue} | {s.run.name for s in self.slots if s.run is not None}
        for run in list(queue):
            if depends.may_start(run) or run.after[0] in alive:
                continue
            queue.remove(run)
            why = "failed" if run.after[0] in res.failed else "is not running in this launch"
            res.failed.append(run.name)
            res.skipped[run.name] = (
                f"waits for {depends.parent_checkpoint(run)}, which will not be written ({run.after[0]} {why})"
            )
            self._say(f"FAILED {run.name}: {res.skipped[run.name]}")

    def _loop(self, queue: list, res: LaunchResult, retry_failed: bool) -> None:
        total = len(queue)
        last_line = 0.0
        while True:
            for slot in self.slots:
                if slot.proc is not None:
                    code = slot.proc.poll()
                    if code is not None:
                        self._finish(slot, code, res)
                while slot.proc is None and queue and not self._stop:
                    self._warm()  # the first start waits for the warm starter's imports (a stop may come)
                    if self._stop:
                        break
                    run = self._next(queue)
                    if run is None:
                        break
                    self._start(slot, run, res, retry_failed)
            if not self._stop:
                self._orphans(queue, res)
            busy = [s for s in self.slots if s.proc is not None]
            if not busy and (not queue or self._stop):
                break
            now = time.time()
            if self.progress and (self._tty or now - last_line > 30):
                self._progress(busy, res, total, len(queue))
                last_line = now
            time.sleep(self.poll_s)
        if self._tty:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()

    def _progress(self, busy: list[Slot], res: LaunchResult, total: int, waiting: int) -> None:
        parts = []
        for s in busy:
            rec = last_record(Path(s.run.run_dir) / METRICS) or {}
            step = rec.get("step", 0)
            loss = rec.get("loss")
            parts.append(f"{s.run.name} {step}/{s.run.steps}" + (f" {loss:.3f}" if isinstance(loss, float) else ""))
        head = f"[{len(res.done)}/{total} done, {len(busy)} running, {waiting} waiting, {len(res.failed)} failed]"
        text = head + " " + " | ".join(parts)
        if self._tty:
            width = os.get_terminal_size(self.stream.fileno()).columns if hasattr(self.stream, "fileno") else 120
            self.stream.write("\r\x1b[2K" + text[: max(20, width - 1)])
            self.stream.flush()
        else:
            self.stream.write(text + "\n")
            self.stream.flush()
