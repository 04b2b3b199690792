"""The GPU check: every CUDA path of the trainer, in tiers, on one GPU node in one command.

Made for a short slot on an air-gapped node (docs/benchmarks.md, "The GPU check"): its python3 has
torch but not DeepSpeed, pydantic, lm-eval, ...; `make gpu-wheels` (benchmarks/gpu_wheels.py) puts
those, a small prepared gutenberg100 set and the eval task files in gpu_wheels/, and this script
installs the wheels with `pip install --no-index --no-deps --target` and PYTHONPATH when they are
not importable. W&B is disabled in every run.

Tiers (`--only 1,3` runs a subset); each part writes its result into one JSON (OUT/gpu_check.json)
as it finishes, and a time guard (`--budget-s`, and each tier's own limit) stops what runs out of
time cleanly (its child killed, the part recorded as `timeout` or `skipped`), keeping what is done:
  1. (3 min) the suite's `cuda`-marked tests; a 125M bf16 run through the real trainer at ZeRO 0
     and 3 (one rank): losses finite and falling, a checkpoint, and an exact resume from it;
  2. (3 min) benchmarks/gpu_throughput.py for gpt-125m, gpt-350m and gpt-1.3b (ZeRO-1): tokens/s, MFU,
     peak memory beside `train --dry-run`'s per-device estimate (goal within 15%) and beside the
     planner's prediction for the same layout on the detected device (step time, tokens/s, MFU, memory;
     measured / predicted), the measured bf16 matmul peak, and a plain bf16 PyTorch loop of the 1.3B
     model (goal: the trainer >= 0.95x it; >= 45% MFU on an H100);
  3. (2 min) train.compile (compile overhead, speed-up), the MoE preset, Muon, the eval adapter
     against lm-eval's `hf` on the same checkpoint (log-likelihoods within 1e-4 in fp32, 1e-2 in bf16;
     time ratio), and the 125M bf16 final loss within 1% of its fp32 loss at the same step.
Without CUDA the same tiers run at toy size (d_model 64, 2 layers, seq 128, fp32 unless the part is
about bf16; BPE 512 data prepared from the bundled corpus unless --data is given), so that the test
suite knows the check starts and finishes; the figures are then CPU figures and the JSON says so.

    python3 benchmarks/gpu_check.py --out OUT [--only 1,2,3] [--budget-s 480] [--wheels gpu_wheels]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIERS = {
    1: ("cuda tests; 125M bf16 through the trainer at ZeRO 0 and 3, checkpoint and exact resume", 180),
    2: ("throughput, MFU and memory of 125M/350M/1.3B; bf16 matmul peak; plain bf16 loop of 1.3B", 180),
    3: ("compile, MoE, Muon, eval adapter vs lm-eval hf, bf16 vs fp32 final loss", 120),
}
# The modules that hold the suite's `cuda`-marked tests (tests/integration/benchmarks/test_gpu_check.py
# checks that every module with the mark is listed): only these are collected, so the node needs none
# of the packages other tests import (playwright, fastapi, ...).
CUDA_TEST_FILES = (
    "tests/unit/pretrain/test_cuda_paths.py",
    "tests/unit/models/test_cuda_paths.py",
    "tests/unit/evals/test_agreement.py",
)
NEEDED = ("deepspeed", "pydantic", "hjson", "zstandard", "lm_eval", "datasets")  # importable, or installed
GPU_PRESETS = ("gpt-125m", "gpt-350m", "gpt-1.3b")
MOE_PRESET = "moe-1.7b-a0.5b"
TOY_MODEL = "gpt-1.3b"  # without CUDA one preset (scaled to the toy size) stands for all three
EVAL_TASKS = ("piqa", "arc_easy", "lambada_openai")
TOY = {  # the toy size of every trainer run without CUDA (benchmarks/gpu_throughput.py's SCALED)
    "model.d_model": 64,
    "model.n_layers": 2,
    "model.n_heads": 4,
    "model.n_kv_heads": None,
    "model.seq_len": 128,
    "model.vocab_size": None,
    "train.threads": 1,
}
TOY_MOE = {"model.moe.num_experts": 4, "model.moe.d_ff": 64}
RESULT_TAG = "GPU_CHECK_RESULT "
PREDICTION_TOLERANCE = 0.20  # the step-time model's stated error (docs/model-design.md): a record, not a stop
TOY_SLACK = 5


# ---------------------------------------------------------------------------------------------
# The record: one JSON, rewritten whole (atomically) after every part


class Record:
    def __init__(self, path: Path, head: dict):
        """A rerun (`--only`) keeps the tiers it does not run from the JSON already there, saying when
        they ran; the tiers it runs start afresh."""
        earlier = {}
        if path.exists():
            try:
                old = json.loads(path.read_text())
                earlier = {k: {**v, "from_run": old.get("started")} for k, v in old.get("tiers", {}).items()}
            except (ValueError, AttributeError):
                earlier = {}
        rerun = {str(t) for t in head.get("only", ())}
        self.path = path
        self.data = {**head, "tiers": {k: v for k, v in earlier.items() if k not in rerun}}
        self.save()

    def part(self, tier: int, name: str, result: dict) -> None:
        t = self.data["tiers"].setdefault(str(tier), {"title": TIERS[tier][0], "limit_s": TIERS[tier][1], "parts": {}})
        t["parts"][name] = result
        self.save()

    def tier_done(self, tier: int, wall: float) -> None:
        t = self.data["tiers"].setdefault(str(tier), {"title": TIERS[tier][0], "limit_s": TIERS[tier][1], "parts": {}})
        statuses = [p.get("status") for p in t["parts"].values()]
        t["wall_s"] = round(wall, 1)
        t["status"] = "ok" if statuses and all(s == "ok" for s in statuses) else _worst(statuses)
        self.save()

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str) + "\n")
        os.replace(tmp, self.path)


def _worst(statuses) -> str:
    for s in ("failed", "timeout", "oom", "skipped"):
        if s in statuses:
            return s
    return "ok" if statuses else "skipped"


# ---------------------------------------------------------------------------------------------
# The environment: wheels installed with --target when the packages are not importable


def missing_packages() -> list[str]:
    return [m for m in NEEDED if importlib.util.find_spec(m) is None]


def install_wheels(wheels: Path, site: Path) -> dict:
    """`pip install --no-index --no-deps --target site wheels/*.whl`, then site on sys.path and
    PYTHONPATH (a venv made on the node's python would not see its torch)."""
    missing = missing_packages()
    info = {"missing_before": missing, "wheels_dir": str(wheels), "site": None}
    if missing:
        whls = sorted(str(p) for p in wheels.glob("*.whl"))
        if not whls:
            raise SystemExit(
                f"not importable here: {', '.join(missing)}; and no wheels in {wheels} "
                "(make gpu-wheels on a machine that reaches the package index, then carry gpu_wheels/)"
            )
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
        cmd += ["--no-cache-dir", "--upgrade", "--target", str(site), *whls]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode:
            raise SystemExit(f"pip install --target {site} failed:\n{res.stdout[-3000:]}{res.stderr[-3000:]}")
        info.update(site=str(site), wheels=len(whls), install_s=round(time.perf_counter() - t0, 1))
        sys.path.insert(0, str(site))
        importlib.invalidate_caches()
    paths = [p for p in (info["site"], str(REPO), os.environ.get("PYTHONPATH")) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    info["missing_after"] = missing_packages()
    info["unmet_requirements"] = unmet_requirements(wheels)
    return info


def unmet_requirements(wheels: Path) -> list[str]:
    """What the carried distributions require that this interpreter does not have in a matching version
    (the node's own packages are not ours: e.g. datasets against the image's pyarrow). A record, not a
    stop: the tiers show whether it matters."""
    import importlib.metadata as md

    try:
        from packaging.requirements import Requirement
    except ImportError:
        return ["(packaging not importable: requirements not checked)"]
    names = {re.sub(r"[-_.]+", "-", p.name.split("-")[0]).lower() for p in wheels.glob("*.whl")}
    env = {"extra": ""}
    out = []
    for name in sorted(names):
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for text in reqs:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            try:
                have = md.version(req.name)
            except md.PackageNotFoundError:
                out.append(f"{name}: {req} (not installed)")
                continue
            if req.specifier and not req.specifier.contains(have, prereleases=True):
                out.append(f"{name}: {req} (have {have})")
    return out


def versions() -> dict:
    import importlib.metadata as md

    out = {"python": sys.version.split()[0]}
    names = ("torch", "deepspeed", "pydantic", "lm_eval", "transformers", "datasets", "triton", "numpy")
    for name in (*names, "pyarrow", "fsspec", "huggingface_hub", "tokenizers", "accelerate"):
        try:
            out[name] = md.version(name.replace("_", "-"))
        except md.PackageNotFoundError:
            out[name] = None
    return out


def commit(wheels: Path) -> str | None:
    """The checkout's commit; where it has no .git (a copied working tree), the one gpu_wheels/ was made at."""
    try:
        res = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        if res.returncode == 0 and res.stdout.strip():
            return res.stdout.strip()
    except OSError:
        pass
    manifest = wheels / "MANIFEST.json"
    if manifest.exists():
        made = json.loads(manifest.read_text()).get("commit")
        return f"{made} (gpu_wheels/MANIFEST.json)" if made else None
    return None


# ---------------------------------------------------------------------------------------------
# Running children under the time guard


class Guard:
    """The check's deadline and the current tier's; children run in their own process group so that a
    timeout (or a SIGTERM to this process) kills the whole tree."""

    def __init__(self, budget_s: float):
        self.start = time.monotonic()
        self.deadline = self.start + budget_s
        self.tier_deadline = self.deadline
        self.child: subprocess.Popen | None = None

    def begin_tier(self, limit_s: float) -> None:
        self.tier_deadline = min(self.deadline, time.monotonic() + limit_s)

    def left(self) -> float:
        return self.tier_deadline - time.monotonic()

    def run(self, cmd: list[str], env: dict | None = None, min_s: float = 5.0) -> dict:
        """{returncode|None, stdout, stderr, wall_s, timed_out}; None when no time was left to start."""
        left = self.left()
        if left < min_s:
            return {"returncode": None, "stdout": "", "stderr": "", "wall_s": 0.0, "timed_out": False, "skipped": True}
        t0 = time.monotonic()
        self.child = subprocess.Popen(
            cmd,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        timed_out = False
        try:
            out, err = self.child.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            timed_out = True
            self.kill()
            out, err = self.child.communicate()
        rc = self.child.returncode
        self.child = None
        return {
            "returncode": rc,
            "stdout": out,
            "stderr": err,
            "wall_s": round(time.monotonic() - t0, 1),
            "timed_out": timed_out,
            "skipped": False,
        }

    def kill(self) -> None:
        if self.child is not None and self.child.poll() is None:
            try:
                os.killpg(self.child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def failure(res: dict, what: str) -> dict:
    if res.get("skipped"):
        return {"status": "skipped", "reason": "time guard: no time left in the tier or the check"}
    if res["timed_out"]:
        return {"status": "timeout", "wall_s": res["wall_s"], "reason": f"{what}: stopped by the time guard"}
    text = (res["stdout"][-3000:] + res["stderr"][-3000:]).strip()
    oom = "out of memory" in text.lower()
    return {"status": "oom" if oom else "failed", "wall_s": res["wall_s"], "error": text[-2000:]}


def part_result(res: dict) -> dict | None:
    for line in res["stdout"].splitlines()[::-1]:
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG) :])
    return None


# ---------------------------------------------------------------------------------------------
# The check


class Check:
    def __init__(self, args, cuda: bool, device: str, rec: Record, guard: Guard, work: Path, data: Path):
        self.args, self.cuda, self.device, self.rec, self.guard = args, cuda, device, rec, guard
        self.work, self.data = work, data
        self.base = self._base_config()
        self.t1_runs: dict[int, Path] = {}
        self.throughput: dict[str, dict] = {}

    # -- configs

    def _base_config(self) -> Path:
        """The runs' base: gpt-125m.yaml (GPU) or tiny.yaml (toy) training on the prepared folder, read
        as a one-component mixture (the corpus it came from need not be there)."""
        import yaml

        src = REPO / "configs/train" / ("gpt-125m.yaml" if self.cuda else "tiny.yaml")
        cfg = yaml.safe_load(src.read_text())
        cfg["data"] = {"name": self.data.name, "mixture": {"check": {"weight": 1.0, "data": str(self.data)}}}
        cfg["wandb"] = {"mode": "disabled"}
        path = self.work / "base.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    def overrides(self, model: str, precision: str, zero: int, steps: int, **extra) -> list[str]:
        over = {
            "model": model,
            "precision": precision,
            "deepspeed.zero_stage": zero,
            "train.tokens": None,
            "train.steps": steps,
            "train.micro_batch_size": 8 if self.cuda else 4,
            "train.global_batch_size": 8 if self.cuda else 4,
            "train.log_every_steps": 1,
            "train.eval_every_steps": 0,
            "train.checkpoint_every_steps": 0,
            "schedule.warmup_steps": 1,
            "wandb.mode": "disabled",
        }
        if not self.cuda:
            over.update(TOY)
            if model.startswith("moe"):
                over.update(TOY_MOE)
        over.update(extra)
        return [f"{k}={'null' if v is None else v}" for k, v in over.items()]

    def train(self, run_dir: Path, over: list[str]) -> dict:
        cmd = [sys.executable, "-m", "pretrain.cli", str(self.base), *over, "--run-dir", str(run_dir), "--no-progress"]
        return self.guard.run(cmd)

    # -- tier 1

    def cuda_tests(self) -> dict:
        xml = self.work / "cuda-tests.xml"
        cmd = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "-o", "addopts="]
        if self.cuda and importlib.util.find_spec("xdist") is not None:
            cmd += ["-n", "6"]  # tiny trainings side by side on the one GPU; the node has the cores
        cmd += ["--junitxml", str(xml), *CUDA_TEST_FILES]
        env = {"SCALELAB_PREPARED_DATA": str(self.data)}  # the node has no corpus: the tests train on this
        if self.args.data_root:
            env["SCALELAB_DATA_ROOT"] = str(self.args.data_root)
        res = self.guard.run(cmd, env=env)
        if res.get("skipped") or res["timed_out"] or not xml.exists():
            return failure(res, "pytest -m cuda")
        suite = ET.parse(xml).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        cases = list(suite.iter("testcase"))
        failed = []
        for c in cases:
            bad = c.find("failure") if c.find("failure") is not None else c.find("error")
            if bad is not None:
                failed.append(
                    {"test": f"{c.get('classname')}::{c.get('name')}", "message": (bad.get("message") or "")[:500]}
                )
        skipped = sum(c.find("skipped") is not None for c in cases)
        return {
            "status": "ok" if res["returncode"] == 0 else "failed",
            "wall_s": res["wall_s"],
            "collected": len(cases),
            "passed": len(cases) - len(failed) - skipped,
            "failed": failed,
            "skipped": skipped,
            "files": list(CUDA_TEST_FILES),
        }

    def trainer_resume(self, zero: int) -> dict:
        """Train S steps with a checkpoint at S/2, then resume from it: losses finite and falling, the
        resumed steps equal to the uninterrupted ones."""
        steps = 8 if self.cuda else 6
        half = steps // 2
        model = "gpt-125m"
        precision = "bf16" if self.cuda else "fp32"
        over = self.overrides(model, precision, zero, steps, **{"train.checkpoint_every_steps": half})
        run = self.work / f"t1-{model}-zero{zero}"
        res = self.train(run, over)
        if res["returncode"] != 0 or not (run / "summary.json").exists():
            return failure(res, "train")
        recs = _metrics(run)
        losses = [r["loss"] for r in recs if "loss" in r]
        third = max(1, len(losses) // 3)
        finite = all(math.isfinite(x) for x in losses)
        falling = finite and sum(losses[-third:]) / third < sum(losses[:third]) / third
        ckpts = sorted(p.name for p in (run / "checkpoints").glob("step_*"))
        first = {r["step"]: (r["loss"], r.get("grad_norm")) for r in recs if "loss" in r}
        shutil.rmtree(run / "checkpoints" / f"step_{steps}", ignore_errors=True)
        (run / "summary.json").unlink()
        again = self.train(run, over)
        out = {
            "model": model,
            "precision": precision,
            "zero": zero,
            "steps": steps,
            "wall_s": res["wall_s"],
            "losses": losses,
            "finite": finite,
            "falling": falling,
            "checkpoints": ckpts,
        }
        if again["returncode"] != 0:
            return {**out, **failure(again, "resume")}
        resumed = f"resumed from checkpoint step_{half}" in again["stdout"]
        second = {r["step"]: (r["loss"], r.get("grad_norm")) for r in _metrics(run) if "loss" in r}
        later = [s for s in first if s > half]
        diffs = [abs(first[s][0] - second[s][0]) for s in later if s in second]
        exact = resumed and len(diffs) == len(later) and all(first[s] == second[s] for s in later)
        self.t1_runs[zero] = run
        ok = finite and falling and resumed and len(diffs) == len(later) and ckpts
        return {
            **out,
            "status": "ok" if ok and exact else "failed",
            "resumed_from": half if resumed else None,
            "resume_wall_s": again["wall_s"],
            "resume_exact": exact,
            "resume_max_loss_diff": max(diffs) if diffs else None,
            "final_loss": json.loads((run / "summary.json").read_text()).get("final_loss"),
        }

    # -- tier 2

    def probe(self, kind: str, **kw) -> dict:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--part", kind, "--part-args", json.dumps(kw)]
        res = self.guard.run(cmd)
        got = part_result(res) if res.get("returncode") == 0 else None
        return {"status": "ok", "wall_s": res["wall_s"], **got} if got else failure(res, kind)

    def gpu_throughput(self, model: str, extra: list[str] = (), tag: str = "") -> dict:
        out = self.work / f"throughput-{model}{tag}.json"
        steps, log = (20, 5) if self.cuda else (3, 1)
        cmd = [sys.executable, str(REPO / "benchmarks/gpu_throughput.py"), "--models", model, "--zero", "1"]
        cmd += ["--steps", str(steps), "--log-every", str(log), "--config", str(self.base)]
        cmd += ["--work", str(self.work / f"tp-{model}{tag}"), "--out", str(out)]
        for item in [*(() if self.cuda else ("train.threads=1",)), *extra]:
            cmd += ["--set", item]
        res = self.guard.run(cmd)
        if not out.exists():
            return failure(res, "gpu_throughput.py")
        r = json.loads(out.read_text())["results"][0]
        r.pop("error", None) if r["status"] == "ok" else None
        return {**r, "wall_s": res["wall_s"], "benchmark_wall_s": r.get("wall_s")}

    def prediction(self, model: str, measured: dict, tag: str = "") -> dict:
        """The performance model's prediction for the layout gpu_throughput.py ran (read from the run's
        config.yaml and ranks.json), beside its measured figures; a run that wrote no config has none."""
        from rundir.config import read_config
        from rundir.layout import RANKS

        run = self.work / f"tp-{model}{tag}" / f"{model}-zero1"
        if not (run / "config.yaml").exists():
            return {"status": "no_prediction", "reason": f"the run wrote no config.yaml ({measured.get('status')})"}
        ranks = run / RANKS
        world = json.loads(ranks.read_text())["world_size"] if ranks.exists() else measured.get("gpus") or 1
        return compare_prediction(predict_run(read_config(run), int(world), self.device), measured)

    def dry_run_estimate(self, model: str) -> dict:
        """`train --dry-run`'s per-device total for the throughput run's settings (GiB)."""
        from rundir.accelerators import device_from_name

        mbs = {"gpt-125m": 16, "gpt-350m": 16, "gpt-1.3b": 8}.get(model, 8) if self.cuda else 4
        over = [
            f"model={model}",
            "precision=" + ("bf16" if self.cuda else "fp32"),
            "deepspeed.zero_stage=1",
            f"train.micro_batch_size={mbs}",
            f"train.global_batch_size={mbs}",
            "train.tokens=null",
            "train.steps=20",
        ]
        if self.cuda:
            over.append("model.seq_len=2048")
        else:
            over += [f"{k}={'null' if v is None else v}" for k, v in TOY.items() if k != "train.threads"]
        key = device_from_name(self.device) if self.cuda else "cpu"
        cmd = [sys.executable, "-m", "pretrain.cli", str(self.base), *over, "--dry-run"]
        if key:
            cmd += ["--device", key]
        res = self.guard.run(cmd)
        m = re.search(r"total ([0-9.]+) \[(cuda|cpu)\]", res["stdout"])
        if res["returncode"] != 0 or not m:
            return failure(res, "train --dry-run")
        return {"status": "ok", "estimate_gib": float(m.group(1)), "estimate_device": m.group(2), "device_key": key}

    # -- tier 3

    def eval_agreement(self) -> dict:
        run = next(iter(self.t1_runs.values()), None)
        if run is None:  # tier 1 did not run (--only): a short run of our own
            run = self.work / "eval-run"
            res = self.train(run, self.overrides("gpt-125m", "fp32", 0, 2, **{"train.checkpoint_every_steps": 2}))
            if res["returncode"] != 0:
                return failure(res, "train (eval checkpoint)")
        hf = self.work / "eval-hf"
        res = self.guard.run([sys.executable, "-m", "launch.cli", "export", "hf", str(run), str(hf)])
        if res["returncode"] != 0:
            return failure(res, "scalelab export hf")
        return self.probe(
            "eval",
            run=str(run),
            hf=str(hf),
            tasks=list(EVAL_TASKS),
            limit=25 if self.cuda else 4,
            dtypes=["float32", "bfloat16"],
            device="cuda" if self.cuda else "cpu",
            data_root=str(self.args.data_root) if self.args.data_root else None,
        )

    def bf16_vs_fp32(self) -> dict:
        """The 125M run at bf16 and at fp32, same steps and data: tier 1's run stands for its precision."""
        zero = 0 if self.cuda else 3
        steps = 8 if self.cuda else 6
        t0 = time.monotonic()
        losses = {}
        t1 = self.t1_runs.get(zero)
        if t1 is not None:
            losses["bf16" if self.cuda else "fp32"] = json.loads((t1 / "summary.json").read_text())["final_loss"]
        for precision in ("bf16", "fp32"):
            if precision in losses:
                continue
            run = self.work / f"t3-{precision}"
            res = self.train(run, self.overrides("gpt-125m", precision, zero, steps))
            if res["returncode"] != 0:
                return failure(res, f"train {precision}")
            losses[precision] = json.loads((run / "summary.json").read_text())["final_loss"]
        rel = abs(losses["bf16"] - losses["fp32"]) / abs(losses["fp32"])
        return {
            "status": "ok",
            "wall_s": round(time.monotonic() - t0, 1),
            "model": "gpt-125m",
            "steps": steps,
            "final_loss": losses,
            "rel_diff": rel,
            "goal": "bf16 final loss within 1% of fp32",
            "met": rel <= 0.01,
        }

    # -- the tiers

    def tier1(self) -> None:
        self.rec.part(1, "cuda_tests", self.cuda_tests())
        for zero in (0, 3) if self.cuda else (3,):  # toy: ZeRO 3 (the partitioned init) only
            self.rec.part(1, f"train_zero{zero}", self.trainer_resume(zero))

    def tier2(self) -> None:
        if self.cuda:
            peak = self.probe("matmul")  # in a child: the parent never holds a CUDA context
        else:
            t0 = time.monotonic()
            peak = {"status": "ok", **part_matmul({}), "wall_s": round(time.monotonic() - t0, 1)}
        self.rec.part(2, "matmul_peak", peak)
        models = GPU_PRESETS if self.cuda else (TOY_MODEL,)
        for model in models:
            r = self.gpu_throughput(model)
            est = self.dry_run_estimate(model) if r.get("status") == "ok" else {"status": "skipped"}
            if est.get("status") == "ok" and r.get("peak_mem_gb"):
                from models.memory import GIB, GPU_CONTEXT_BYTES

                measured_gib = r["peak_mem_gb"] * 1e9 / GIB
                # torch's max_memory_allocated does not see the CUDA context the estimate's `other` adds
                allocator_gib = est["estimate_gib"] - (GPU_CONTEXT_BYTES / GIB if self.cuda else 0)
                r["memory"] = {
                    "measured_gib": round(measured_gib, 3),
                    "measured_kind": r.get("peak_mem_kind"),
                    "reserved_gib": round(r["peak_reserved_gb"] * 1e9 / GIB, 3) if r.get("peak_reserved_gb") else None,
                    **est,
                    "estimate_allocator_gib": round(allocator_gib, 3),
                    "ratio": round(measured_gib / allocator_gib, 3),
                    "goal": "max_memory_allocated within 15% of the estimate less the CUDA context",
                    "met": abs(measured_gib / allocator_gib - 1) <= 0.15 if self.cuda else None,
                }
            if r.get("status") == "ok" and peak.get("status") == "ok" and r.get("flops_per_token"):
                r["mfu_vs_measured_peak"] = r["tokens_per_s"] * r["flops_per_token"] / peak["flops"]
            r["prediction"] = self.prediction(model, r)
            print(prediction_line(model, r["prediction"]), flush=True)
            self.throughput[model] = r
            self.rec.part(2, f"throughput_{model}", r)
        big = models[-1]
        loop = self.probe("plain-loop", model=big, base=str(self.base), overrides=self._loop_overrides(big))
        t = self.throughput.get(big, {})
        if loop.get("status") == "ok" and t.get("status") == "ok":
            loop["trainer_tokens_per_s"] = t["tokens_per_s"]
            loop["trainer_over_plain"] = t["tokens_per_s"] / loop["tokens_per_s"]
            loop["goal"] = "trainer >= 0.95x the plain loop; >= 45% MFU on one H100"
            on_h100 = self.cuda and "H100" in self.device
            loop["met"] = (loop["trainer_over_plain"] >= 0.95 and (t.get("mfu") or 0) >= 0.45) if on_h100 else None
        self.rec.part(2, "plain_loop", loop)

    def _loop_overrides(self, model: str) -> list[str]:
        over = [f"model={model}", "precision=" + ("bf16" if self.cuda else "fp32"), "train.tokens=null"]
        mbs = {"gpt-1.3b": 8}.get(model, 16) if self.cuda else 4
        over += [f"train.micro_batch_size={mbs}", f"train.global_batch_size={mbs}", "train.steps=20"]
        if not self.cuda:
            over += [f"{k}={'null' if v is None else v}" for k, v in TOY.items() if k != "train.threads"]
        else:
            over.append("model.seq_len=2048")
        return over

    def tier3(self) -> None:
        """Correctness first (the eval adapter, bf16 vs fp32), then speed; compile, the slowest, last."""
        self.rec.part(3, "eval_adapter", self.eval_agreement())
        self.rec.part(3, "bf16_vs_fp32", self.bf16_vs_fp32())
        small = "gpt-125m" if self.cuda else TOY_MODEL  # toy: every preset is the same toy model
        self.rec.part(3, "moe", self.gpu_throughput(MOE_PRESET))
        self.rec.part(3, "muon", self.gpu_throughput(small, ["optim.name=muon"], "-muon"))
        base = self.throughput.get(small)
        # toy: Dynamo's tracing through DeepSpeed's engine.compile without a code generator (inductor on CPU
        # compiles C++ for minutes, aot_eager adds ~20 s of AOT autograd on the CI machine)
        backend = "inductor" if self.cuda else "eager"
        comp = self.gpu_throughput(small, ["train.compile=true", f"train.compile_backend={backend}"], "-compile")
        if comp.get("status") == "ok":
            if base is None or base.get("status") != "ok":
                base = self.gpu_throughput(small, [], "-eager")
            if base.get("status") == "ok":
                comp["speedup"] = comp["tokens_per_s"] / base["tokens_per_s"]
                comp["compile_overhead_s"] = round(comp["benchmark_wall_s"] - base["benchmark_wall_s"], 1)
            comp["backend"] = backend
        self.rec.part(3, "compile", comp)


def _metrics(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]


# ---------------------------------------------------------------------------------------------
# The performance model against the measured run (docs/benchmarks.md, "Reading the prediction")


def run_layout(raw: dict, world: int) -> dict:
    """The layout keys (models/layout_memory.py) of a trainer run from its resolved config.yaml: data
    parallel over its `world` ranks, no TP, PP or CP, its micro-batch, accumulation, ZeRO stage and
    checkpointing (the trainer runs no selective recomputation), expert parallel as model.moe.ep_size."""
    train, model = raw["train"], raw["model"]
    mbs = int(train["micro_batch_size"])
    ck = train.get("activation_checkpointing") or "none"
    return {
        "tp": 1,
        "cp": 1,
        "pp": 1,
        "dp": world,
        "ep_size": int((model.get("moe") or {}).get("ep_size") or 1),
        "zero_stage": int(raw["deepspeed"]["zero_stage"]),
        "micro_batch_size": mbs,
        "gradient_accumulation_steps": int(train["global_batch_size"]) // (mbs * world),
        "activation_checkpointing": ck,
        "activation_checkpointing_k": train.get("activation_checkpointing_k") if ck == "every_k" else None,
    }


def predict_run(raw: dict, world: int, device_name: str) -> dict:
    """What `scalelab plan --layout ...` predicts for the layout a run ran (its resolved config, `world`
    ranks on one node of `device_name` as torch names it): the planner's step-time model
    (scaling/planning/perf_model.py: machine, step_time) and layout memory model (models/layout_memory.py),
    at the run's precision on the accelerator table's row for the device. Arithmetic: milliseconds.
    `status` "no_prediction" with a `reason` where the table cannot price the device (the CPU, an H100
    NVL, ...) or the layout."""
    t0 = time.perf_counter()
    from models.config import ModelConfig
    from models.layout_memory import ParallelLayout, check_layout, layout_memory
    from models.memory import GIB, GPU_CONTEXT_BYTES
    from rundir.accelerators import MEMORY_BYTES, device_from_name
    from scaling.core.errors import InputError
    from scaling.planning.perf_model import machine, step_time

    keys = run_layout(raw, world)
    key = device_from_name(device_name)
    out = {
        "status": "ok",
        "reason": None,
        "device": device_name,
        "device_key": key,
        "precision": raw["precision"],
        "layout": keys,
        "source": "scaling/planning/perf_model.py (step time) + models/layout_memory.py (memory)",
    }

    def no_prediction(reason: str) -> dict:
        return {**out, "status": "no_prediction", "reason": reason, "wall_s": round(time.perf_counter() - t0, 4)}

    if key is None:
        return no_prediction(
            f"device {device_name!r} is not in the accelerator table (rundir/accelerators.py): no peak to predict from"
        )
    try:
        mach = machine(key, raw["precision"], devices_per_node=world)
    except InputError as exc:
        return no_prediction(str(exc))
    cfg = ModelConfig.model_validate(raw["model"])
    lay = ParallelLayout(**keys)
    problem = check_layout(cfg, lay)
    if problem:
        return no_prediction(f"the run's layout: {problem}")
    mem = layout_memory(cfg, lay, raw["precision"], MEMORY_BYTES.get(key))
    perf = step_time(cfg, lay, mach)
    total = mem["per_device_bytes"]["total"]
    out["predicted"] = {
        "step_time_s": perf["step_time_s"],
        "tokens_per_step": perf["tokens_per_step"],
        "tokens_per_s": perf["tokens_per_s"],
        "mfu": perf["mfu"],
        "hfu": perf["hfu"],
        "model_flops_per_token": perf["model_flops_per_token"],
        "peak_flops": mach.peak,
        "memory_gib": total / GIB,
        # the allocator's view (torch.cuda.max_memory_allocated): without the CUDA context the estimate adds
        "memory_allocator_gib": (total - GPU_CONTEXT_BYTES) / GIB,
        "memory_fits": mem["fits"],
        "memory_engine": mem["engine"],
        "breakdown_s": perf["breakdown_s"],
    }
    out["wall_s"] = round(time.perf_counter() - t0, 4)
    return out


def compare_prediction(pred: dict, measured: dict) -> dict:
    """The prediction beside gpu_throughput.py's figures of the same run, with measured / predicted."""
    from models.memory import GIB

    got = measured if measured.get("status") == "ok" else {}
    mem = got.get("peak_mem_gb")
    m = {
        "step_time_s": got.get("step_s"),
        "tokens_per_s": got.get("tokens_per_s"),
        "mfu": got.get("mfu"),
        "memory_gib": mem * 1e9 / GIB if mem and got.get("peak_mem_kind") == "mem/max_allocated_gb" else None,
    }
    p = pred.get("predicted") or {}
    against = {"step_time_s": "step_time_s", "tokens_per_s": "tokens_per_s", "mfu": "mfu"}
    against["memory_gib"] = "memory_allocator_gib"
    ratio = {k: (m[k] / p[v] if m[k] and p.get(v) else None) for k, v in against.items()}
    tps = ratio["tokens_per_s"]
    return {
        **pred,
        "measured": m,
        "measured_over_predicted": ratio,
        "goal": f"measured tokens/s within {PREDICTION_TOLERANCE:.0%} of the prediction (its calibration error)",
        "met": abs(tps - 1) <= PREDICTION_TOLERANCE if tps is not None else None,
    }


def prediction_line(model: str, pred: dict) -> str:
    if pred.get("status") != "ok":
        return f"  {model}: no prediction: {pred.get('reason')}"
    p, r = pred["predicted"], pred["measured_over_predicted"]
    lay = pred["layout"]
    fmt = lambda x: "n/a" if x is None else f"{x:.2f}"  # noqa: E731
    return (
        f"  {model} predicted on {pred['device_key']} (ZeRO-{lay['zero_stage']}, micro-batch "
        f"{lay['micro_batch_size']} x {lay['gradient_accumulation_steps']}, {pred['precision']}): "
        f"{p['step_time_s'] * 1000:.1f} ms/step, {p['tokens_per_s']:,.0f} tokens/s, MFU {p['mfu']:.1%}, "
        f"{p['memory_allocator_gib']:.2f} GiB allocated; measured/predicted: step time {fmt(r['step_time_s'])}, "
        f"tokens/s {fmt(r['tokens_per_s'])}, MFU {fmt(r['mfu'])}, memory {fmt(r['memory_gib'])}"
    )


# ---------------------------------------------------------------------------------------------
# Parts that run in a child process (CUDA stays out of the parent): `--part NAME --part-args JSON`


def part_matmul(_args: dict) -> dict:
    import torch

    if not torch.cuda.is_available():
        from pretrain.callbacks.speed_monitor import measure_cpu_peak

        return {"flops": measure_cpu_peak(), "dtype": "float32", "n": 1024, "device": "cpu"}
    n, reps = 8192, 10
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        a @ b
    end.record()
    torch.cuda.synchronize()
    s = start.elapsed_time(end) / 1e3 / reps
    return {"flops": 2 * n**3 / s, "dtype": "bfloat16", "n": n, "device": torch.cuda.get_device_name(0)}


def part_plain_loop(args: dict) -> dict:
    """The model of the trainer's run in a plain PyTorch loop: on CUDA bf16 weights and fused AdamW
    (the trainer's ZeRO-1 bf16 runs the same bf16 forward and backward, plus an fp32 master step),
    the same micro-batch, sequence and data; tokens/s after warm-up, peak memory."""
    import torch

    from models.accounting import model_counts
    from models.gpt import GPT
    from pretrain.config.loader import load_train_config
    from pretrain.data.mixture import open_mixture
    from pretrain.feed.sampler import WindowSampler
    from pretrain.optim.adamw import param_groups

    cfg = load_train_config(args["base"], args["overrides"])
    data = open_mixture(cfg.data, prepare_missing=False).components[0].data
    mcfg = cfg.model.model_copy(update={"vocab_size": data.vocab_size})
    cuda = torch.cuda.is_available()
    if not cuda:
        torch.set_num_threads(1)  # as the toy trainer runs (train.threads=1)
    dev = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda and cfg.precision == "bf16" else torch.float32
    torch.manual_seed(0)
    model = GPT(mcfg).to(dev, dtype)
    opt = torch.optim.AdamW(param_groups(model, cfg.optim), lr=cfg.optim.lr, **({"fused": True} if cuda else {}))
    sampler = WindowSampler(data.split_tokens("train"), mcfg.seq_len, 0)
    bs = cfg.train.micro_batch_size
    warm, measured = (3, 10) if cuda else (1, 3)
    for step in range(warm + measured):
        if step == warm:
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        x, y = sampler.batch(step * bs, bs)
        loss = model(x.to(dev, non_blocking=True), targets=y.to(dev, non_blocking=True), logits=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
    final = float(loss)
    if cuda:
        torch.cuda.synchronize()
    tps = measured * bs * mcfg.seq_len / (time.perf_counter() - t0)
    return {
        "model": args["model"],
        "tokens_per_s": tps,
        "micro_batch": bs,
        "seq_len": mcfg.seq_len,
        "precision": str(dtype).removeprefix("torch."),
        "flops_per_token": model_counts(mcfg).flops_per_token,
        "peak_mem_gb": torch.cuda.max_memory_allocated() / 1e9 if cuda else None,
        "final_loss": final,
    }


def part_eval(args: dict) -> dict:
    """Our adapter and lm-eval's `hf` on the same checkpoint (the HF export), same requests: the
    largest log-likelihood difference (absolute, and relative to max(1, |ll|)) and the time ratio."""
    import logging

    if args.get("data_root"):
        os.environ["SCALELAB_DATA_ROOT"] = args["data_root"]
    os.environ.setdefault("TQDM_DISABLE", "1")
    logging.disable(logging.WARNING)
    sys.path.insert(0, str(REPO / "benchmarks"))
    from eval_throughput import build_requests, compare  # noqa: E402 - the same requests and timing
    from lm_eval.models.huggingface import HFLM

    from evals.adapter import ScalelabLM

    reqs = build_requests(args["tasks"], args["limit"])
    out = {"tasks": args["tasks"], "limit": args["limit"], "device": args["device"], "by_dtype": {}}
    for dtype in args["dtypes"]:
        ours_lm = ScalelabLM(path=args["run"], device=args["device"], dtype=dtype, batch_size=16)
        mine = [r for r in reqs if not r.args[0] or len(ours_lm._encode_pair(*r.args)[1]) <= ours_lm.max_length]
        hf_lm = HFLM(pretrained=args["hf"], device=args["device"], batch_size=16, dtype=dtype)
        ours, ref, t_ours, t_hf = compare(ours_lm, hf_lm, mine, 1)
        diffs = [abs(a[0] - b[0]) for a, b in zip(ours, ref)]
        rel = [d / max(1.0, abs(b[0])) for d, b in zip(diffs, ref)]
        tol = 1e-4 if dtype == "float32" else 1e-2
        out["by_dtype"][dtype] = {
            "requests": len(mine),
            "max_abs_diff": max(diffs),
            "max_rel_diff": max(rel),
            "tolerance": tol,
            "met": max(rel) <= tol,
            "greedy_same": sum(a[1] == b[1] for a, b in zip(ours, ref)),
            "ours_s": t_ours[0],
            "hf_s": t_hf[0],
            "hf_over_ours": t_hf[0] / t_ours[0],
        }
        del ours_lm, hf_lm
    return out


PARTS = {"matmul": part_matmul, "plain-loop": part_plain_loop, "eval": part_eval}


# ---------------------------------------------------------------------------------------------


def toy_data(work: Path) -> Path:
    """Without --data on CPU: the bundled corpus's default data set with a 512-token BPE."""
    out = work / "data-toy512"
    cmd = [sys.executable, "-m", "launch.cli", "data", "prepare", "default", "tokenizer.vocab_size=512"]
    cmd += ["name=toy512", "--out", str(out)]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"preparing the toy data failed:\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=False, help="folder for gpu_check.json (created)")
    ap.add_argument("--only", default="1,2,3", help="comma-separated tiers to run (default 1,2,3)")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="stop starting work after this many seconds (default 480; toy size 1800)",
    )
    ap.add_argument("--wheels", default=str(REPO / "gpu_wheels"), help="wheels folder (make gpu-wheels)")
    ap.add_argument("--site", help="where to pip install --target the wheels (default: a temporary folder)")
    ap.add_argument("--data", help="prepared data folder (default: WHEELS/data/gutenberg100-gpt2, toy data on CPU)")
    ap.add_argument("--data-root", help="shared data folder for the eval tasks (default: WHEELS/data if it has evals/)")
    ap.add_argument("--work", help="folder for the runs (default: a temporary folder, removed unless --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    ap.add_argument("--part", choices=sorted(PARTS), help=argparse.SUPPRESS)
    ap.add_argument("--part-args", default="{}", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.part:  # a child: print one tagged JSON line
        sys.path.insert(0, str(REPO))
        print(RESULT_TAG + json.dumps(PARTS[args.part](json.loads(args.part_args)), default=float), flush=True)
        return 0
    if not args.out:
        print("--out DIR is required", file=sys.stderr)
        return 2
    try:
        only = sorted({int(t) for t in args.only.split(",") if t.strip()})
    except ValueError:
        only = [0]
    if not only or any(t not in TIERS for t in only):
        print(f"--only: tiers are {', '.join(map(str, TIERS))}, comma-separated; got {args.only!r}", file=sys.stderr)
        return 2
    if args.budget_s is not None and args.budget_s <= 0:
        print(f"--budget-s must be > 0, got {args.budget_s}", file=sys.stderr)
        return 2
    os.environ["WANDB_MODE"] = "disabled"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    wheels = Path(args.wheels).resolve()
    site_tmp = None if args.site else tempfile.TemporaryDirectory(prefix="gpu-check-site-")
    install = install_wheels(wheels, Path(args.site or site_tmp.name))
    sys.path.insert(0, str(REPO))
    import torch

    cuda = torch.cuda.is_available()
    device = torch.cuda.get_device_name(0) if cuda else "cpu"
    if not cuda:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    if args.data_root is None and (wheels / "data" / "evals").exists():
        args.data_root = str(wheels / "data")
    # not under OUT: on the lent machine what is under $OUT comes back (8 files at most), checkpoints must not
    work = Path(args.work).resolve() if args.work else Path(tempfile.mkdtemp(prefix="gpu-check-work-"))
    work.mkdir(parents=True, exist_ok=True)
    # toy size: every tier's limit times TOY_SLACK (each trainer process starts in seconds on a GPU node,
    # in tens of seconds on a loaded 2-core CI machine)
    slack = 1 if cuda else TOY_SLACK
    args.budget_s = args.budget_s or (480 if cuda else 1800)
    guard = Guard(args.budget_s)
    shipped = wheels / "data" / "gutenberg100-gpt2"
    data = Path(args.data).resolve() if args.data else (shipped if cuda or shipped.exists() else None)
    if data is None:
        data = toy_data(work)
    if not (data / "meta.json").exists():
        print(f"--data: {data} is not a prepared data folder (no meta.json); run make gpu-wheels", file=sys.stderr)
        return 2
    head = {
        "check": "benchmarks/gpu_check.py",
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": device,
        "cuda": cuda,
        "toy": not cuda,
        "commit": commit(wheels),
        "versions": versions(),
        "install": install,
        "data": str(data),
        "only": only,
        "budget_s": args.budget_s,
        "tier_limit_scale": slack,  # each tier's limit_s times this
    }
    rec = Record(out / "gpu_check.json", head)
    check = Check(args, cuda, device, rec, guard, work, data)

    def stop(signum, _frame):  # the slot's own limit: keep what is done, say so
        guard.kill()
        rec.data["stopped"] = f"signal {signum} after {time.monotonic() - guard.start:.0f}s"
        rec.save()
        sys.exit(124)

    signal.signal(signal.SIGTERM, stop)
    print(f"device: {device}" + ("" if cuda else " (no CUDA: the tiers run at TOY size; CPU figures)"), flush=True)
    saved = 0.0  # what earlier tiers left of their limits: later tiers may use it
    try:
        for tier in only:
            title, limit = TIERS[tier]
            # one tier alone (a rerun) may use the whole budget; else its limit plus what earlier tiers saved
            limit = args.budget_s if len(only) == 1 else limit * slack + saved
            guard.begin_tier(limit)
            t0 = time.monotonic()
            print(f"tier {tier} (<= {limit:.0f}s): {title}", flush=True)
            getattr(check, f"tier{tier}")()
            rec.tier_done(tier, time.monotonic() - t0)
            saved = max(0.0, limit - (time.monotonic() - t0))
            for name, p in rec.data["tiers"][str(tier)]["parts"].items():
                print(f"  {name}: {p.get('status')}  {p.get('wall_s', '')}s", flush=True)
    finally:
        guard.kill()
        rec.data["wall_s"] = round(time.monotonic() - guard.start, 1)
        statuses = [t.get("status") for t in rec.data["tiers"].values()]
        rec.data["status"] = "ok" if statuses and all(s == "ok" for s in statuses) else _worst(statuses)
        rec.save()
        if not (args.keep or args.work):
            shutil.rmtree(work, ignore_errors=True)
        if site_tmp:
            site_tmp.cleanup()
    print(f"{rec.data['status']}: wrote {rec.path} in {rec.data['wall_s']}s", flush=True)
    return 0 if rec.data["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
