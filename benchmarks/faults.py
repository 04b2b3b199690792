"""The fault matrix: inject each fault on tiny runs through the CLI and print one table.

    python benchmarks/faults.py [--seeds 3] [--only kill9,nan_loss,...] [--workdir DIR] [--json OUT]

Every row drives the real `scalelab` CLI (DeepSpeed trainer, local sweep executor, lm-eval, Slurm
when a cluster answers `sinfo`) on a ~50K-parameter model trained on TinyShakespeare, and checks
the run against an uninterrupted reference of the same config:

- runs: how many faulted runs the row made;
- resumed exactly: how many, after the fault was gone and the same command ran again, finished with
  metrics equal bitwise, step for step, to the reference (`-` where the row has no resume);
- data lost: finished results that existed before the fault and are gone or changed after it
  (metrics rows up to the last complete checkpoint, complete checkpoints, finished runs, evaluation
  results): it must be 0;
- exit: the exit codes seen (fault run -> recovery run);
- message: the line the user is shown about the fault.

A fault the installation cannot stage (no Slurm, no tmpfs mount) is reported as skipped with why.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from rundir.checkpoints import complete_checkpoints  # noqa: E402  (the repository's packages, from any directory)
from rundir.layout import METRICS  # noqa: E402
from rundir.metrics import read_metrics  # noqa: E402
from tests.helpers.cli import cli_env, scalelab, wait_for_step  # noqa: E402
from tests.helpers.cli import start as start_cli  # noqa: E402

COMPARED = ("step", "tokens", "loss", "lr", "grad_norm", "val_loss", "val_bpb")
STEPS, EVERY = 60, 6


@dataclass
class Row:
    fault: str
    runs: int = 0
    exact: list[bool] = field(default_factory=list)
    lost: int = 0
    exits: list[str] = field(default_factory=list)
    message: str = ""
    ok: bool = True  # the outcome the contract asks for
    skipped: str = ""

    def cells(self) -> list[str]:
        if self.skipped:
            return [self.fault, "0", "-", "-", "-", f"skipped: {self.skipped}"]
        exact = f"{sum(self.exact)}/{len(self.exact)}" if self.exact else "-"
        return [self.fault, str(self.runs), exact, str(self.lost), ", ".join(self.exits), self.message]


# ---------------------------------------------------------------- plumbing
# The CLI in a process of its own, waiting on a run's progress: the test suite's helpers (tests/helpers/cli.py),
# with a quiet, offline environment and no fault left set from outside.
QUIET = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
    "OMP_NUM_THREADS": "1",
    "TQDM_DISABLE": "1",
}
UNSET = ("SCALELAB_FAULT_NAN_STEP",)


def _unset(extra: dict | None) -> tuple[str, ...]:
    return tuple(k for k in UNSET if k not in (extra or {}))  # a row's own fault stays set


def env(extra: dict | None = None) -> dict:
    return cli_env({**QUIET, **(extra or {})}, _unset(extra))


def cli(args: list[str], cwd: Path, extra_env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    extra = {**QUIET, **(extra_env or {})}
    return scalelab(*args, cwd=cwd, env=extra, unset=_unset(extra_env), timeout=timeout, process=True)


def start(args: list[str], cwd: Path, extra_env: dict | None = None) -> subprocess.Popen:
    return start_cli(args, cwd, {**QUIET, **(extra_env or {})}, _unset(extra_env))


def base_config(folder: Path, data: Path, **train) -> Path:
    data_cfg = {
        "name": "faults512",
        "sources": ["corpus/tinyshakespeare.txt"],
        "tokenizer": {"kind": "bpe", "vocab_size": 512},
        "out_dir": str(data),
    }
    cfg = {
        "model": {"preset": "n50k", "seq_len": 64},
        "data": data_cfg,
        "optim": {"lr": 3e-3},
        "schedule": {"name": "cosine", "warmup_steps": 4},
        "train": {
            "steps": STEPS,
            "micro_batch_size": 8,
            "global_batch_size": 8,
            "log_every_steps": 1,
            "eval_every_steps": 12,
            "eval_tokens": 2048,
            "checkpoint_every_steps": EVERY,
            "threads": 1,
            **train,
        },
        "deepspeed": {"zero_stage": 0},
        "wandb": {"mode": "disabled"},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.yaml").write_text(yaml.safe_dump(data_cfg))
    path = folder / "base.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def comparable(run: Path) -> list[tuple]:
    return [tuple(r.get(k) for k in COMPARED) for r in read_metrics(run / METRICS)]


def complete_steps(run: Path) -> list[int]:
    return [step for step, _ in complete_checkpoints(run / "checkpoints")]


def snapshot(run: Path) -> dict:
    """What a fault must not take away: metrics up to the last complete checkpoint, and that checkpoint."""
    steps = complete_steps(run)
    last = steps[-1] if steps else 0
    return {
        "rows": [tuple(r.get(k) for k in COMPARED) for r in read_metrics(run / METRICS) if r["step"] <= last],
        "last_ckpt": last,
    }


def lost_since(run: Path, snap: dict, final: bool = True) -> int:
    """Rows of the snapshot missing or changed now, plus the snapshot's checkpoint if it is gone
    while the run is not finished (a finished run may prune it)."""
    now = set(comparable(run))
    lost = sum(1 for r in snap["rows"] if r not in now)
    summary = run / "summary.json"
    done = summary.exists() and json.loads(summary.read_text()).get("status") == "done"
    if snap["last_ckpt"] and not done and snap["last_ckpt"] not in complete_steps(run):
        lost += 1
    return lost


def first_line(text: str, *needles: str, after: int = 0) -> str:
    """The first line holding the first needle found (needles in order of preference); `after`
    lines further on when the message continues there."""
    lines = text.splitlines()
    for n in needles:
        for i, line in enumerate(lines):
            if n.lower() in line.lower():
                return " ".join(x.strip() for x in lines[i : i + 1 + after])[:200]
    return ""


class Bench:
    def __init__(self, work: Path, seeds: int):
        self.work, self.seeds = work, seeds
        self.data = work / "data"
        self.base = base_config(work / "base", self.data)
        self.rng = random.Random(0)
        print(f"preparing data and the {STEPS}-step reference run in {work} ...", flush=True)
        r = cli(["data", "prepare", self.base.parent / "data.yaml"], work)
        if r.returncode != 0:
            raise SystemExit(f"data prepare failed: {r.stdout[-2000:]}{r.stderr[-2000:]}")
        self.ref = work / "reference"
        if not (self.ref / "summary.json").exists():
            r = cli(["train", self.base, "--run-dir", self.ref, "--no-progress"], work)
            if r.returncode != 0:
                raise SystemExit(f"reference run failed: {r.stdout[-3000:]}")
        self.reference = comparable(self.ref)
        self.n = 0

    def run_dir(self, tag: str) -> Path:
        self.n += 1
        d = self.work / f"{self.n:02d}-{tag}"
        shutil.rmtree(d, ignore_errors=True)
        return d

    def train_args(self, run: Path, *over: str) -> list[str]:
        return ["train", self.base, *over, "--run-dir", run, "--no-progress"]

    def finish(
        self, row: Row, run: Path, snap: dict, over: tuple = (), extra_env: dict | None = None
    ) -> subprocess.CompletedProcess:
        """Run the same command again with the fault gone; record exactness, loss and exit."""
        r = cli(self.train_args(run, *over), self.work, extra_env)
        row.exact.append(r.returncode == 0 and comparable(run) == self.reference)
        row.lost += lost_since(run, snap)
        return r

    # ------------------------------------------------------------ faults

    def kill9(self) -> Row:
        row = Row("kill -9 at a random step")
        codes = []
        for seed in range(self.seeds):
            step = random.Random(seed).randint(4, STEPS - 4)
            run = self.run_dir(f"kill9-s{seed}")
            p = start(self.train_args(run), self.work)
            wait_for_step(run, step, p, timeout=600)
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            snap = snapshot(run)
            r = self.finish(row, run, snap)
            row.runs += 1
            codes.append(f"-9 -> {r.returncode}")
            row.message = row.message or f"step {step}: " + first_line(r.stdout, "resumed from")
        row.exits = sorted(set(codes))
        row.message = f"{self.seeds} seeds; " + row.message
        return row

    def sigterm_in_checkpoint(self) -> Row:
        row = Row("SIGTERM during a checkpoint write")
        run = self.run_dir("sigterm-ckpt")
        # The hook holds the write open between the state files and COMPLETE, so the signal lands inside it.
        fault = {"SCALELAB_FAULT_CHECKPOINT_DELAY_S": "3"}
        p = start(self.train_args(run), self.work, fault)
        target = None
        t0 = time.time()
        while target is None and time.time() - t0 < 600 and p.poll() is None:
            for d in (run / "checkpoints").glob("step_*") if (run / "checkpoints").exists() else []:
                if int(d.name[5:]) >= 2 * EVERY and not (d / "COMPLETE").exists() and any(d.iterdir()):
                    target = d
            time.sleep(0.005)
        if target is None:
            row.skipped = "no checkpoint write was caught in progress"
            p.kill()
            return row
        os.killpg(p.pid, signal.SIGTERM)
        out, _ = p.communicate(timeout=300)
        snap = snapshot(run)
        r = self.finish(row, run, snap)
        row.runs = 1
        row.exits = [f"{p.returncode} -> {r.returncode}"]
        row.message = first_line(out, "received SIGTERM") or out.strip().splitlines()[-1][:160]
        row.ok = p.returncode == 3
        return row

    def disk_full(self) -> Row:
        row = Row("disk fills during a checkpoint")
        ckpt = sum(f.stat().st_size for f in (self.ref / "checkpoints" / f"step_{STEPS}").rglob("*") if f.is_file())
        mnt = self.work / "tmpfs"
        mnt.mkdir(exist_ok=True)
        size = int(ckpt * 2.6) + 256 * 1024  # two checkpoints and the run's small files; the third cannot fit
        m = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True, text=True
        )
        if m.returncode != 0:
            row.skipped = f"cannot mount a small tmpfs ({m.stderr.strip()[:80]})"
            return row
        try:
            run = mnt / "run"
            r1 = cli(self.train_args(run), self.work)
            snap = snapshot(run)
            row.message = (
                first_line(r1.stdout + r1.stderr, "could not be written", "no space", "errno 28")
                or (r1.stdout + r1.stderr).strip().splitlines()[-1][:160]
            )
            steps = complete_steps(run)
            ok_ckpt = bool(steps)
            subprocess.run(["mount", "-o", f"remount,size={64 << 20}", str(mnt)], check=True)
            r2 = self.finish(row, run, snap)
            row.runs, row.exits = 1, [f"{r1.returncode} -> {r2.returncode}"]
            row.ok = r1.returncode != 0 and ok_ckpt
        finally:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        return row

    def truncated_metrics(self) -> Row:
        row = Row("truncated metrics.jsonl")
        run = self.run_dir("torn-metrics")
        p = start(self.train_args(run), self.work)
        wait_for_step(run, 33, p, timeout=600)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        snap = snapshot(run)
        with open(run / "metrics.jsonl", "a") as f:  # a torn last line, as a crash mid-write leaves it
            f.write('{"step": 34, "tokens": 1, "lo')
        r = self.finish(row, run, snap)
        row.runs, row.exits = 1, [f"-9 -> {r.returncode}"]
        row.message = first_line(r.stdout + r.stderr, "resumed from")
        return row

    def corrupt_newest(self) -> Row:
        row = Row("corrupt newest checkpoint")
        run = self.run_dir("corrupt-newest")
        p = start(self.train_args(run), self.work)
        wait_for_step(run, 26, p, timeout=600)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        steps = complete_steps(run)
        f = run / "checkpoints" / f"step_{steps[-1]}" / "mp_rank_00_model_states.pt"
        f.write_bytes(f.read_bytes()[:100])
        snap = snapshot(run)
        snap["last_ckpt"] = steps[-2]  # the damaged one is not "good"; the one before it must survive
        snap["rows"] = [x for x in snap["rows"] if x[0] <= steps[-2]]
        r = self.finish(row, run, snap)
        row.runs, row.exits = 1, [f"-9 -> {r.returncode}"]
        row.message = first_line(r.stdout, "could not be loaded")
        return row

    def all_checkpoints_unloadable(self) -> Row:
        row = Row("every checkpoint unloadable")
        run = self.run_dir("all-corrupt")
        p = start(self.train_args(run), self.work)
        wait_for_step(run, 20, p, timeout=600)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        before = {f: f.stat().st_size for f in run.rglob("*") if f.is_file()}
        for s in complete_steps(run):
            f = run / "checkpoints" / f"step_{s}" / "mp_rank_00_model_states.pt"
            f.write_bytes(f.read_bytes()[:100])
            before[f] = 100
        rows_before = comparable(run)
        r = cli(self.train_args(run), self.work)
        after = {f: f.stat().st_size for f in run.rglob("*") if f.is_file()}
        row.runs, row.exits = 1, [f"-9 -> {r.returncode}"]
        row.lost = sum(1 for f, size in before.items() if after.get(f) != size and f.name != "train.log")
        row.lost += sum(1 for x in rows_before if x not in set(comparable(run)))
        row.message = first_line(
            r.stdout + r.stderr, "none of the complete checkpoints", "could not be loaded", "error"
        )
        row.ok = r.returncode == 1 and row.lost == 0
        return row

    def nan_loss(self) -> Row:
        row = Row("NaN loss")
        run = self.run_dir("nan")
        r1 = cli(self.train_args(run), self.work, {"SCALELAB_FAULT_NAN_STEP": "14"})
        snap = snapshot(run)
        r2 = self.finish(row, run, snap)
        row.runs, row.exits = 1, [f"{r1.returncode} -> {r2.returncode}"]
        row.message = first_line(r1.stdout + r1.stderr, "non-finite")
        row.ok = r1.returncode == 1 and snap["last_ckpt"] == 12
        return row

    def inf_gradient(self) -> Row:
        row = Row("inf gradient at a checkpoint step")
        run = self.run_dir("inf-grad")
        r1 = cli(self.train_args(run), self.work, {"SCALELAB_FAULT_INF_GRAD_STEP": str(2 * EVERY - 1)})
        out = r1.stdout + r1.stderr
        summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").exists() else {}
        row.runs, row.exits = 1, [str(r1.returncode)]
        row.message = first_line(out, "non-finite gradient", "skipp") or "no message about the gradient"
        # The contract: the step is skipped (counted) and every complete checkpoint has finite weights.
        import torch

        finite = True
        for s in complete_steps(run):
            sd = torch.load(
                run / "checkpoints" / f"step_{s}" / "mp_rank_00_model_states.pt", map_location="cpu", weights_only=False
            )
            finite &= all(torch.isfinite(v).all() for v in sd.get("module", {}).values() if torch.is_tensor(v))
        row.ok = r1.returncode == 0 and finite and summary.get("skipped_steps", 0) >= 1
        row.message += f"; finite weights in every complete checkpoint: {finite}"
        return row

    def failing_eval_task(self) -> Row:
        row = Row("failing eval task")
        run = self.ref
        evals = run / "evals"
        before = {p.name: p.read_text() for p in evals.glob("*.json")} if evals.exists() else {}
        tasks = "blimp_anaphor_number_agreement,lambada_openai"
        r1 = cli(
            ["eval", run, "--tasks", tasks, "--limit", "4"], self.work, {"SCALELAB_EVAL_FAULT": "task:lambada_openai"}
        )
        doc1 = json.loads((evals / f"{STEPS}.json").read_text())
        kept = any(x["task"] == "blimp_anaphor_number_agreement" for x in doc1["results"])
        failed = [f["task"] for f in doc1["failed"]]
        r2 = cli(["eval", run, "--tasks", tasks, "--limit", "4"], self.work)
        doc2 = json.loads((evals / f"{STEPS}.json").read_text())
        healed = not doc2["failed"] and any(x["task"] == "lambada_openai" for x in doc2["results"])
        row.runs, row.exits = 1, [f"{r1.returncode} -> {r2.returncode}"]
        row.lost = sum(1 for k in before if not (evals / k).exists()) + (0 if kept else 1)
        row.exact = [healed]
        row.message = first_line(r1.stdout + r1.stderr, "failed") or f"failed tasks recorded: {failed}"
        return row

    def worker_killed_mid_sweep(self) -> Row:
        row = Row("worker killed mid-sweep")
        work = self.work / "sweep-kill"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        spec = work / "sk.yaml"
        spec.write_text(
            yaml.safe_dump(
                {
                    "name": "sk",
                    "base": str(self.base),
                    "kind": "grid",
                    "runs_dir": str(work / "runs"),
                    "axes": {"train.seed": [0, 1, 2]},
                    "set": {"train.steps": 240, "train.eval_every_steps": 0},
                }
            )
        )
        p = start(["sweep", "launch", spec, "--workers", "1"], work)
        runs = work / "runs"
        t0 = time.time()
        while time.time() - t0 < 900:
            done = (
                [d for d in runs.glob("*/summary.json") if json.loads(d.read_text()).get("status") == "done"]
                if runs.exists()
                else []
            )
            partial = (
                list({d.parent.parent.parent for d in runs.glob("*/checkpoints/step_*/COMPLETE")})
                if runs.exists()
                else []
            )
            partial = [
                d
                for d in partial
                if not (d / "summary.json").exists() and complete_steps(d) and complete_steps(d)[-1] >= 4 * EVERY
            ]
            if done and partial:
                break
            time.sleep(0.1)
        # kill -9 the launcher and every trainer it started (they run in their own sessions)
        victims = [
            int(x) for x in subprocess.run(["pgrep", "-f", str(runs)], capture_output=True, text=True).stdout.split()
        ]
        for pid in [p.pid, *victims]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()
        finished = {d.parent.name: d.read_text() for d in runs.glob("*/summary.json")}
        snaps = {d.name: snapshot(d) for d in runs.iterdir() if d.is_dir() and not d.name.startswith(".")}
        time.sleep(1)
        r = cli(["sweep", "launch", spec, "--workers", "1"], work)
        row.runs, row.exits = 3, [f"-9 -> {r.returncode}"]
        row.lost = sum(1 for k, v in finished.items() if (runs / k / "summary.json").read_text() != v)
        row.lost += sum(lost_since(runs / k, s) for k, s in snaps.items())
        states = [
            json.loads((d / "summary.json").read_text())["status"]
            for d in runs.iterdir()
            if (d / "summary.json").exists()
        ]
        resumed = (
            [d.name for d in runs.iterdir() if "resumed from checkpoint" in (d / "train.log").read_text()]
            if runs.exists()
            else []
        )
        row.exact = [states.count("done") == 3]
        row.message = f"{len(finished)} finished run kept untouched; resumed: {', '.join(resumed) or 'none'}"
        return row

    def stale_extension_lock(self) -> Row:
        row = Row("stale C++ extension build lock")
        ext = self.work / "torch-ext"
        (ext / "deepspeed_shm_comm").mkdir(parents=True, exist_ok=True)
        (ext / "deepspeed_shm_comm" / "lock").touch()  # what a build killed mid-way leaves behind
        run = self.run_dir("stale-lock")
        t0 = time.time()
        try:
            r = cli(self.train_args(run, "train.steps=6"), self.work, {"TORCH_EXTENSIONS_DIR": str(ext)}, timeout=300)
            code, out = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired:
            code, out = "hung", ""
        row.runs, row.exits = 1, [str(code)]
        row.message = (
            f"finished in {time.time() - t0:.0f} s with the lock file in place"
            if code == 0
            else (first_line(out, "lock") or "hung past 300 s")
        )
        row.ok = code == 0
        return row

    def busy_run_lock(self) -> Row:
        from launch.run.locks import RunLock

        row = Row("run held by another launch")
        run = self.run_dir("busy")
        run.mkdir(parents=True)
        (run / "launch.yaml").write_text(self.base.read_text())
        lock = RunLock(run, role="local")
        assert lock.acquire()
        try:
            r = subprocess.run(
                [sys.executable, "-m", "launch.run.worker", str(run)],
                cwd=self.work,
                env=env(),
                capture_output=True,
                text=True,
                timeout=120,
            )
        finally:
            lock.release()
        row.runs, row.exits = 1, [str(r.returncode)]
        row.message = first_line(r.stderr + r.stdout, "held by")
        row.ok = r.returncode == 1 and not (run / "summary.json").exists()
        return row

    def bad_sweep_spec(self) -> Row:
        row = Row("sweep that would fail once queued")
        work = self.work / "preflight"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        cases = {
            "batch": {"set": {"train.global_batch_size": 6, "train.micro_batch_size": 4}},
            "data": {"set": {"data.sources": ["corpus/no-such-file.txt"]}},
            "slurm": {"executor": {"slurm": {"partition": "debug\ntouch /tmp/owned"}}},
        }
        codes, msgs = [], []
        for name, extra in cases.items():
            spec = work / f"{name}.yaml"
            spec.write_text(
                yaml.safe_dump(
                    {
                        "name": f"pf-{name}",
                        "base": str(self.base),
                        "kind": "seeds",
                        "seeds": [0, 1],
                        "runs_dir": str(work / "runs"),
                        **extra,
                    }
                )
            )
            r = cli(["sweep", "launch", spec, "--executor", "slurm" if name == "slurm" else "local"], work)
            codes.append(r.returncode)
            msgs.append(first_line(r.stderr + r.stdout, "pre-flight", "error", after=1) or "?")
            row.runs += 1
        row.exits = [", ".join(map(str, codes))]
        row.lost = 0 if not (work / "runs").exists() or not any((work / "runs").glob("s*")) else 1
        row.message = f"{len(cases)} specs (batch, data, slurm field), nothing queued; e.g. " + msgs[1]
        row.ok = all(c == 2 for c in codes) and row.lost == 0
        return row

    def eval_turned_on(self) -> Row:
        row = Row("in-loop eval turned on after a sweep finished")
        work = self.work / "identity"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        spec = {
            "name": "idt",
            "base": str(self.base),
            "kind": "grid",
            "runs_dir": str(work / "runs"),
            "axes": {"optim.lr": [3e-3]},
            "set": {"train.steps": 12, "train.eval_every_steps": 0},
        }
        (work / "idt.yaml").write_text(yaml.safe_dump(spec))
        r1 = cli(["sweep", "launch", work / "idt.yaml"], work)
        before = {p.parent.name: p.read_text() for p in (work / "runs").glob("*/summary.json")}
        spec["set"]["eval"] = {"suite": "tiny", "every_tokens": 4096}
        spec["axes"]["train.seed"] = [0]  # a one-value axis appears too
        (work / "idt.yaml").write_text(yaml.safe_dump(spec))
        r2 = cli(["sweep", "launch", work / "idt.yaml"], work)
        after = {p.parent.name: p.read_text() for p in (work / "runs").glob("*/summary.json")}
        row.runs, row.exits = 1, [f"{r1.returncode} -> {r2.returncode}"]
        row.lost = sum(1 for k, v in before.items() if after.get(k) != v)
        row.message = first_line(r2.stdout, "to run") or r2.stdout.strip().splitlines()[-1][:160]
        row.ok = r2.returncode == 0 and row.lost == 0 and len(after) == len(before) == 1
        return row

    def wandb_service_killed(self) -> Row:
        row = Row("W&B service killed with the job")
        run = self.run_dir("wandb-killed")
        over = ("wandb.mode=offline",)
        p = start(self.train_args(run, *over), self.work, {"WANDB_MODE": "offline"})
        wait_for_step(run, 20, p, timeout=600)
        kids = subprocess.run(["pgrep", "-s", str(p.pid)], capture_output=True, text=True).stdout.split()
        for pid in kids:  # what Slurm's SIGTERM to the whole job does: the trainer and wandb-core together
            try:
                os.kill(int(pid), signal.SIGTERM)
            except ProcessLookupError:
                pass
        out, _ = p.communicate(timeout=300)
        snap = snapshot(run)
        r = self.finish(row, run, snap, over, {"WANDB_MODE": "offline"})
        row.runs, row.exits = 1, [f"{p.returncode} -> {r.returncode}"]
        row.message = (first_line(out, "W&B") or first_line(out, "received SIGTERM")) + (
            "; traceback shown" if "Traceback" in out else ""
        )
        row.ok = p.returncode == 3 and "Traceback" not in out
        return row

    def moe_zero3_two_ranks(self) -> Row:
        row = Row("MoE, ZeRO-3, 2 ranks, uneven eval windows: kill -9")
        launcher = Path(sys.executable).parent / "deepspeed"
        over = [
            "model.moe.num_experts=4",
            "model.moe.top_k=2",
            "model.moe.d_ff=64",
            "deepspeed.zero_stage=3",
            "train.steps=12",
            "train.global_batch_size=16",
            "train.eval_every_steps=6",
            "train.eval_tokens=1088",
            "train.checkpoint_every_steps=3",
        ]
        moe = ROOT / "configs/train/tiny-moe.yaml"
        if not moe.exists():
            row.skipped = "configs/train/tiny-moe.yaml missing"
            return row
        data = [
            "model=n50k",
            "model.seq_len=64",
            "data.tokenizer.vocab_size=512",
            "data.name=faults-moe512",
            f"data.out_dir={self.work / 'data-moe'}",
            "train.tokens=null",
            "train.log_every_steps=1",
            "train.micro_batch_size=8",
            "train.threads=1",
            "wandb.mode=disabled",
        ]

        def launch(run: Path, port: int) -> subprocess.Popen:
            return subprocess.Popen(
                [
                    str(launcher),
                    "--num_gpus",
                    "2",
                    "--master_port",
                    str(port),
                    "--module",
                    "pretrain.cli",
                    str(moe),
                    *data,
                    *over,
                    "--run-dir",
                    str(run),
                    "--no-progress",
                ],
                cwd=self.work,
                env=env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )

        ref, run = self.run_dir("moe-z3-ref"), self.run_dir("moe-z3")
        p = launch(ref, 29611)
        out, _ = p.communicate(timeout=900)
        if p.returncode != 0:
            row.exits, row.message, row.ok = (
                [str(p.returncode)],
                "reference failed: " + out.strip().splitlines()[-1][:140],
                False,
            )
            return row
        p = launch(run, 29612)
        wait_for_step(run, 7, p, timeout=600)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        snap = snapshot(run)
        p2 = launch(run, 29613)
        out, _ = p2.communicate(timeout=900)
        row.runs, row.exits = 1, [f"-9 -> {p2.returncode}"]
        row.exact = [p2.returncode == 0 and comparable(run) == comparable(ref)]
        row.lost = lost_since(run, snap)
        row.message = (
            first_line(out, "resumed from")
            + f"; val_loss at steps {[r['step'] for r in read_metrics(run / METRICS) if 'val_loss' in r]}"
        )
        return row

    def slurm_preemption(self) -> Row:
        row = Row("Slurm preemption (SIGUSR1)")
        s = (
            subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], capture_output=True, text=True)
            if shutil.which("sinfo")
            else None
        )
        if (
            s is None
            or s.returncode != 0
            or not any(x.rstrip("*") in ("idle", "mix", "alloc") for x in s.stdout.split())
        ):
            row.skipped = "no usable Slurm node (run .ci/slurm_up.sh)"
            return row
        work = self.work / "slurm"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        spec = work / "sp.yaml"
        spec.write_text(
            yaml.safe_dump(
                {
                    "name": "sp",
                    "base": str(self.base),
                    "kind": "seeds",
                    "seeds": [0],
                    "runs_dir": str(work / "runs"),
                    "executor": {"slurm": {"cpus_per_task": 1, "signal_secs": 60}},
                }
            )
        )
        r = cli(["sweep", "launch", spec, "--executor", "slurm"], work)
        job = next((w for w in r.stdout.split() if w.isdigit()), None)
        run = work / "runs" / "s0"
        t0 = time.time()
        while not (run / "checkpoints" / f"step_{2 * EVERY}" / "COMPLETE").exists():
            if time.time() - t0 > 600:
                row.skipped = "the Slurm task never reached its second checkpoint"
                return row
            time.sleep(0.1)
        snap = snapshot(run)
        subprocess.run(["scancel", "--signal=USR1", "--batch", f"{job}_0"], capture_output=True)
        t0 = time.time()
        while time.time() - t0 < 900:
            show = subprocess.run(["scontrol", "show", "job", f"{job}_0"], capture_output=True, text=True).stdout
            if "JobState=PENDING" in show:
                time.sleep(3)
                subprocess.run(["scontrol", "update", f"JobId={job}_0", "StartTime=now"], capture_output=True)
            sm = run / "summary.json"
            if sm.exists() and json.loads(sm.read_text()).get("status") in ("done", "failed"):
                break
            time.sleep(1)
        text = (run / "train.log").read_text()
        row.runs = 1
        row.exact = [comparable(run) == self.reference]
        row.lost = lost_since(run, snap)
        row.exits = [first_line(text, "trainer exit code").replace("=== ", "") or "?"]
        row.message = first_line(text, "received SIGUSR1")
        return row


FAULTS = [
    "kill9",
    "sigterm_in_checkpoint",
    "disk_full",
    "truncated_metrics",
    "corrupt_newest",
    "all_checkpoints_unloadable",
    "nan_loss",
    "inf_gradient",
    "failing_eval_task",
    "worker_killed_mid_sweep",
    "stale_extension_lock",
    "busy_run_lock",
    "bad_sweep_spec",
    "eval_turned_on",
    "wandb_service_killed",
    "moe_zero3_two_ranks",
    "slurm_preemption",
]


def table(rows: list[Row]) -> str:
    head = ["fault", "runs", "resumed exactly", "data lost", "exit", "message"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in r.cells()) + " |" for r in rows]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="kill -9 repetitions at random steps")
    ap.add_argument("--only", default="", help=f"comma-separated subset of: {','.join(FAULTS)}")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the runs here (default: a temp dir, removed)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    a = ap.parse_args()
    names = [n for n in a.only.split(",") if n] or FAULTS
    unknown = sorted(set(names) - set(FAULTS))
    if unknown:
        ap.error(f"--only: unknown fault(s) {unknown}; allowed: {', '.join(FAULTS)}")
    work = a.workdir or Path(tempfile.mkdtemp(prefix="scalelab-faults-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    bench = Bench(work.resolve(), a.seeds)
    rows = []
    for name in names:
        t1 = time.time()
        try:
            row = getattr(bench, name)()
        except Exception as exc:  # one broken row must not hide the others
            row = Row(name, message=f"HARNESS ERROR {type(exc).__name__}: {str(exc)[:200]}", ok=False)
        if not row.skipped and (row.lost or (row.exact and not all(row.exact))):
            row.ok = False
        rows.append(row)
        print(f"  {name}: {time.time() - t1:.0f}s {'ok' if row.ok else 'NOT OK'}", flush=True)
    print()
    print(table(rows))
    print(
        f"\n{len(rows)} faults in {time.time() - t0:.0f} s; "
        f"{sum(not r.ok and not r.skipped for r in rows)} not as the "
        f"contract asks, {sum(bool(r.skipped) for r in rows)} skipped"
    )
    if a.json:
        a.json.write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    if a.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if any(not r.ok and not r.skipped for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
