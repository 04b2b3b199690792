"""benchmarks/gpu_check.py starts and finishes without a GPU: every tier at toy size through the real
trainer, gpu_throughput.py, the dry run, the eval adapter and lm-eval's hf, into one JSON; and
the suite's `cuda` tests are all where the check looks for them."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from tests.helpers import REPO, scalelab

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
    # the performance model's prediction: the CPU is not in the accelerator table, so the reason, and the
    # layout the run ran as read from its run directory, beside the measured figures
    pred = tp["prediction"]
    assert pred["status"] == "no_prediction" and "accelerator table" in pred["reason"] and pred["device"] == "cpu"
    assert pred["precision"] == "fp32" and pred["layout"] == {
        "tp": 1, "cp": 1, "pp": 1, "dp": 1, "ep_size": 1, "zero_stage": 1, "micro_batch_size": 4,
        "gradient_accumulation_steps": 1, "activation_checkpointing": "none", "activation_checkpointing_k": None,
    }  # fmt: skip
    assert pred["measured"]["tokens_per_s"] == tp["tokens_per_s"] and pred["measured"]["memory_gib"] is None
    assert set(pred["measured_over_predicted"].values()) == {None} and pred["met"] is None
    assert "gpt-1.3b: no prediction: device 'cpu' is not in the accelerator table" in res.stdout
    assert t3["compile"]["backend"] == "eager" and t3["compile"]["speedup"] > 0
    assert t3["moe"]["status"] == "ok" and t3["muon"]["status"] == "ok"
    ev = t3["eval_adapter"]["by_dtype"]
    assert ev["float32"]["requests"] > 0 and ev["float32"]["met"]  # our adapter = lm-eval's hf to 1e-4
    assert ev["bfloat16"]["requests"] > 0
    assert t3["bf16_vs_fp32"]["rel_diff"] < 0.05
    assert not list(out.iterdir())[1:]  # only gpu_check.json: the run directories are elsewhere and removed


def _throughput_config(model: str, mbs: int) -> dict:
    """The resolved config.yaml of tier 2's gpu_throughput.py run of `model` on a GPU (GPT-2 vocabulary)."""
    from pretrain.config.loader import load_train_config

    over = [f"model={model}", "model.seq_len=2048", "precision=bf16", "deepspeed.zero_stage=1", "train.tokens=null"]
    over += ["train.steps=20", f"train.micro_batch_size={mbs}", f"train.global_batch_size={mbs}"]
    cfg = load_train_config(REPO / "configs/train/gpt-125m.yaml", [*over, "model.vocab_size=50257"])
    return cfg.model_dump(mode="json")


def test_prediction_for_a_gpu_run_is_what_plan_prices_for_its_layout(tmp_path):
    """Tier 2's prediction for gpt-125m (ZeRO-1, micro-batch 16, seq 2048, bf16) on an H100 equals
    `scalelab plan --model ... --layout ...` for that layout on one h100-sxm, and measured / predicted
    is the ratio of the figures beside it; a device outside the table gets the reason."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import gpu_check

    raw = _throughput_config("gpt-125m", 16)
    pred = gpu_check.predict_run(raw, 1, "NVIDIA H100 80GB HBM3")
    assert pred["status"] == "ok" and pred["device_key"] == "h100-sxm" and pred["precision"] == "bf16"
    lay = pred["layout"]
    assert (lay["dp"], lay["zero_stage"], lay["micro_batch_size"], lay["gradient_accumulation_steps"]) == (1, 1, 16, 1)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(raw))
    spec = "tp=1,pp=1,dp=1,zero_stage=1,micro_batch_size=16,gradient_accumulation_steps=1,activation_checkpointing=none"
    res = scalelab(
        "plan", "--model", "run.yaml", "--tokens", "1e9", "--device", "h100-sxm", "--num-devices", "1",
        "--global-batch-tokens", str(16 * 2048), "--layout", spec, "--runs", str(tmp_path / "no-runs"), "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    plan = json.loads(res.stdout)
    p, perf = pred["predicted"], plan["performance"]
    for key in ("step_time_s", "tokens_per_s", "mfu", "hfu"):
        assert p[key] == pytest.approx(perf[key], rel=1e-9), key
    total = plan["layout"]["memory"]["per_device_bytes"]["total"]
    assert p["memory_gib"] == pytest.approx(total / 2**30) and p["memory_allocator_gib"] == pytest.approx(
        p["memory_gib"] - 1
    )
    assert 0.1 < p["mfu"] < 0.6 and p["memory_fits"] is True and p["tokens_per_step"] == 16 * 2048

    measured = {"status": "ok", "tokens_per_s": 0.9 * p["tokens_per_s"], "step_s": p["step_time_s"] / 0.9}
    measured.update(mfu=0.9 * p["mfu"], peak_mem_gb=20.0, peak_mem_kind="mem/max_allocated_gb")
    c = gpu_check.compare_prediction(pred, measured)
    r = c["measured_over_predicted"]
    assert r["tokens_per_s"] == pytest.approx(0.9) and r["mfu"] == pytest.approx(0.9) and c["met"] is True
    assert r["step_time_s"] == pytest.approx(1 / 0.9)
    assert r["memory_gib"] == pytest.approx(20e9 / 2**30 / p["memory_allocator_gib"])
    line = gpu_check.prediction_line("gpt-125m", c)
    assert "gpt-125m predicted on h100-sxm" in line and "tokens/s 0.90" in line and "MFU 0.90" in line

    nvl = gpu_check.predict_run(raw, 1, "NVIDIA H100 NVL")  # another peak than the table's H100s
    assert nvl["status"] == "no_prediction" and "accelerator table" in nvl["reason"] and "predicted" not in nvl
    assert gpu_check.compare_prediction(nvl, measured)["met"] is None


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
