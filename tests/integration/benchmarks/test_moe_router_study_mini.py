"""The router study's two-seed miniature (`benchmarks/moe_routers.py --paired --size mini`):
softmax_topk and sigmoid_threshold, 2 seeds each, launched through the sweep launcher and
reported as paired differences with intervals, compute multipliers, realised FLOPs and router
health; a rerun trains nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import yaml

from tests.helpers import REPO


def test_two_seed_miniature_of_the_router_study(tiny_data, tmp_path):
    cmd = [
        sys.executable,
        str(REPO / "benchmarks/moe_routers.py"),
        "--paired",
        "--size",
        "mini",
        "--runs-root",
        str(tmp_path),
        "--set",
        f"data.out_dir={tiny_data}",
        "data.name=tiny512",
        "data.tokenizer.vocab_size=512",
        "--json",
        str(tmp_path / "mini.json"),
    ]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "smallest difference detected at 80% power" in res.stdout
    out = json.loads((tmp_path / "mini.json").read_text())
    arms = out["arms"]["e4k2"]
    assert set(arms) == {"softmax_topk", "sigmoid_threshold"}
    ours = arms["sigmoid_threshold"]
    assert ours["seeds"] == [0, 1] and ours["paired"]["seeds"] == [0, 1]
    assert ours["paired"]["lo"] <= ours["paired"]["mean"] <= ours["paired"]["hi"]
    assert ours["flops_kind"] == ["realised"] and ours["equal_compute"]["ratio"] > 0
    for col in ("active_experts", "val_active_experts", "imbalance_micro", "load_entropy", "k_std"):
        assert ours[col] is not None, col
    assert arms["softmax_topk"]["active_experts"] == 2.0
    again = subprocess.run(cmd + ["--no-launch"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "sweep launch" not in again.stdout

    # the mechanism check (benchmarks/moe_k_vs_loss.py) on the same runs, run from another folder: per-token
    # k against loss for the variable-k router, "constant k" for a fixed-k one
    ours_runs = sorted(tmp_path.glob("*/*sigmoid_threshold*-s0"))
    fixed_runs = sorted(tmp_path.glob("*/*softmax_topk*-s0"))
    assert len(ours_runs) == 1 and len(fixed_runs) == 1, sorted(tmp_path.glob("*/*"))
    check = [sys.executable, str(REPO / "benchmarks/moe_k_vs_loss.py"), *ours_runs, *fixed_runs, "--windows", "2"]
    mech = subprocess.run(check, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert mech.returncode == 0, mech.stdout[-3000:] + mech.stderr[-3000:]
    ours_line, fixed_line = mech.stdout.strip().splitlines()
    seq = yaml.safe_load((ours_runs[0] / "config.yaml").read_text())["model"]["seq_len"]
    assert f": {2 * seq} tokens," in ours_line, ours_line  # 2 windows of seq_len predictions
    assert re.search(r"pearson [+-]\d\.\d{3} spearman [+-]\d\.\d{3}; loss by k: k~\d", ours_line), ours_line
    assert "mean k 2.00, constant k" in fixed_line, fixed_line
