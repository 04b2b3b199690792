"""The router study's two-seed miniature (`benchmarks/moe_routers.py --paired --size mini`):
softmax_topk and sigmoid_threshold, 2 seeds each, launched through the sweep launcher and
reported as paired differences with intervals, compute multipliers, realised FLOPs and router
health; a rerun trains nothing."""

from __future__ import annotations

import json
import subprocess
import sys

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
