"""benchmarks/gpu_throughput.py keeps working without a GPU: its scaled-down CPU mode drives real
`scalelab train` runs and writes the JSON a GPU run writes."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import REPO

BENCH = REPO / "benchmarks/gpu_throughput.py"


def test_cpu_mode_runs_the_trainer_and_writes_the_results(tiny_data, tmp_path):
    out = tmp_path / "bench.json"
    cmd = [
        sys.executable,
        str(BENCH),
        "--models",
        "gpt-1.3b,moe-1.7b-a0.5b",
        "--zero",
        "3",
        "--steps",
        "2",
        "--log-every",
        "1",
        "--data-dir",
        str(tiny_data),
        "--set",
        "data.name=tiny512",
        "--set",
        "train.threads=1",
        "--work",
        str(tmp_path / "runs"),
        "--out",
        str(out),
    ]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "SCALED-DOWN CPU version" in res.stdout
    target = next(line for line in res.stdout.splitlines() if line.startswith("gpt-1.3b"))
    assert "tokens/s" in target and "MFU" in target and ">= 45% MFU on one H100" in target and "MET" not in target
    data = json.loads(out.read_text())
    assert data["scaled_down"] is True and data["cuda"] is False and data["gpus"] == 1
    assert [(r["model"], r["zero"], r["status"]) for r in data["results"]] == [
        ("gpt-1.3b", 3, "ok"),
        ("moe-1.7b-a0.5b", 3, "ok"),
    ]
    dense, moe = data["results"]
    for r in data["results"]:
        assert r["seq_len"] == 128 and r["precision"] == "fp32" and r["windows"] == 1  # the first window is warm-up
        assert r["tokens_per_s"] > 0 and 0 < r["mfu"] < 1 and r["peak_source"] == "measured-cpu-fp32"
        assert r["peak_mem_kind"] == "mem/max_rss_gb" and r["peak_mem_gb"] > 0.05
        assert r["comm_s"] >= 0 and r["step_s"] > 0
        assert "pretrain.cli" in r["command"] and "deepspeed.zero_stage=3" in r["command"]
    assert moe["flops_per_token"] < dense["flops_per_token"] * 2  # top-2 of 4 small experts: active, not total FLOPs


def test_unknown_model_exits_2_before_any_run(tmp_path):
    res = subprocess.run(
        [sys.executable, str(BENCH), "--models", "gpt-9b", "--out", str(tmp_path / "x.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "gpt-9b" in res.stderr and not (tmp_path / "x.json").exists()
