"""benchmarks/gpu_check.py starts and finishes without a GPU: every tier at toy size through the real
trainer, gpu_throughput.py, the dry run, the eval adapter and lm-eval's hf, into one JSON; and
the suite's `cuda` tests are all where the check looks for them."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.helpers import REPO

CHECK = REPO / "benchmarks/gpu_check.py"


@pytest.mark.slow
@pytest.mark.timeout(1200)  # ~14 processes: about 70 CPU-seconds, minutes of wall time on a loaded machine
def test_toy_check_runs_every_tier_and_writes_one_json(tiny_data, tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, str(CHECK), "--out", str(out), "--data", str(tiny_data), "--wheels", str(tmp_path / "none")]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=1100)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "TOY size" in res.stdout
    data = json.loads((out / "gpu_check.json").read_text())
    assert data["toy"] is True and data["cuda"] is False and data["status"] == "ok"
    assert data["install"]["missing_before"] == [] and data["install"]["site"] is None  # the venv has them all
    tiers = data["tiers"]
    assert sorted(tiers) == ["1", "2", "3"] and all(t["status"] == "ok" for t in tiers.values())
    t1, t2, t3 = (tiers[k]["parts"] for k in ("1", "2", "3"))
    tests = t1["cuda_tests"]
    assert tests["collected"] >= 9 and tests["skipped"] == tests["collected"] and tests["failed"] == []
    z3 = t1["train_zero3"]
    assert z3["finite"] and z3["falling"] and z3["resume_exact"] and z3["resumed_from"] == 3
    assert z3["checkpoints"] == ["step_3", "step_6"]
    assert t2["matmul_peak"]["device"] == "cpu" and t2["matmul_peak"]["flops"] > 1e8
    tp = t2["throughput_gpt-1.3b"]
    assert tp["tokens_per_s"] > 0 and tp["seq_len"] == 128 and tp["memory"]["estimate_device"] == "cpu"
    assert tp["memory"]["measured_gib"] > 0 and tp["memory"]["met"] is None  # goals are GPU goals
    assert t2["plain_loop"]["tokens_per_s"] > 0 and t2["plain_loop"]["trainer_over_plain"] > 0
    assert t3["compile"]["backend"] == "eager" and t3["compile"]["speedup"] > 0
    assert t3["moe"]["status"] == "ok" and t3["muon"]["status"] == "ok"
    ev = t3["eval_adapter"]["by_dtype"]
    assert ev["float32"]["requests"] > 0 and ev["float32"]["met"]  # our adapter = lm-eval's hf to 1e-4
    assert ev["bfloat16"]["requests"] > 0
    assert t3["bf16_vs_fp32"]["rel_diff"] < 0.05
    assert not list(out.iterdir())[1:]  # only gpu_check.json: the run directories are elsewhere and removed


def test_time_guard_stops_cleanly_and_keeps_the_json(tiny_data, tmp_path):
    """A budget far too short: what runs out of time is killed (timeout) or never started (skipped),
    the check exits 1 soon after the budget, and the JSON says so."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(CHECK), "--out", str(out), "--only", "1", "--budget-s", "6"]
    cmd += ["--data", str(tiny_data), "--wheels", str(tmp_path / "none")]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    data = json.loads((out / "gpu_check.json").read_text())
    parts = data["tiers"]["1"]["parts"]
    assert list(parts) == ["cuda_tests", "train_zero3"]
    assert {p["status"] for p in parts.values()} <= {"ok", "timeout", "skipped"}
    assert data["status"] in ("timeout", "skipped") and data["wall_s"] < 6 + 20


def test_bad_tier_exits_2_before_any_work(tmp_path):
    res = subprocess.run(
        [sys.executable, str(CHECK), "--out", str(tmp_path / "o"), "--only", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "--only" in res.stderr and not (tmp_path / "o").exists()


def test_every_module_with_cuda_tests_is_run_by_the_check():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import gpu_check

    marked = {
        str(p.relative_to(REPO))
        for p in (REPO / "tests").rglob("test_*.py")
        if re.search(r"pytest\.mark\.cuda\b", p.read_text())
    }
    assert marked == set(gpu_check.CUDA_TEST_FILES)
