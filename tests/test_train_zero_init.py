"""ZeRO-3 partitioned construction (`deepspeed.zero_init`): two CPU ranks under the `deepspeed`
launcher each hold about half of the parameters right after the model is built, and the run
trains exactly like the unpartitioned build (the same initial weights: every step's loss and
gradient norm are bitwise equal, the first step's loss being that of the initial weights), and
resumes exactly. One MoE model covers what partitioned construction must respect: tied
embeddings, grouped K/V heads, routed experts (stacked weights), a shared expert and a router
(dense models at ZeRO-3 build the same way: tests/test_train_zero.py, test_moe_training.py)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, metrics, tiny_overrides, free_port

TINY_MOE = str(REPO / "configs/train/tiny-moe.yaml")
MODEL = {"model.tie_embeddings": "true", "model.n_kv_heads": 2, "model.moe.num_experts": 4, "model.moe.top_k": 2,
         "model.moe.d_ff": 64, "model.moe.num_shared_experts": 1}
SHARES = re.compile(r"ZeRO-3 partitioned init: parameter elements held per rank after the build: "
                    r"rank 0 ([\d,]+) \([\d.]+%\), rank 1 ([\d,]+) \([\d.]+%\) of ([\d,]+)")


def launch(cfg: str, over: list[str], run: str, cwd: Path, port: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    launcher = Path(sys.executable).parent / "deepspeed"
    res = subprocess.run([str(launcher), "--num_gpus", "2", "--master_port", str(port), "--module", "pretrain.cli", cfg,
                          *over, "--run-dir", run, "--no-progress"], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


def curve(run: Path) -> list[tuple]:
    return [(r["step"], r["loss"], r["grad_norm"], r.get("aux_loss"), r.get("val_loss")) for r in metrics(run)]


@pytest.mark.slow
def test_two_rank_zero3_builds_partitioned_and_trains_like_the_full_build(tiny_data, tmp_path):
    cfg = TINY_MOE
    over = tiny_overrides(tiny_data, **MODEL, **{"train.steps": 6, "train.checkpoint_every_steps": 3,
                                                 "train.global_batch_size": 16, "train.eval_every_steps": 6,
                                                 "deepspeed.zero_stage": 3})
    port = free_port()
    res = launch(cfg, over, "init", tmp_path, port)
    held0, held1, total = (int(x.replace(",", "")) for x in SHARES.search(res.stdout + res.stderr).groups())
    print(f"parameter elements held: rank 0 {held0:,}, rank 1 {held1:,} of {total:,}")
    assert held0 + held1 >= total and max(held0, held1) <= 0.51 * total  # each rank about half (plus padding)
    full = launch(cfg, over + ["deepspeed.zero_init=false"], "full", tmp_path, port + 1)
    assert "partitioned init" not in full.stdout + full.stderr
    init = curve(tmp_path / "init")
    assert len(init) == 6 and init[-1][1] < init[0][1] and init[-1][4] is not None
    assert init == curve(tmp_path / "full")  # bitwise: the same initial weights and the same training
    # Resume: as if killed after the step-3 checkpoint; the partitioned build loads it and continues exactly.
    shutil.rmtree(tmp_path / "init" / "checkpoints" / "step_6")
    (tmp_path / "init" / "summary.json").unlink()
    again = launch(cfg, over, "init", tmp_path, port + 2)
    assert "resumed from checkpoint step_3" in again.stdout + again.stderr
    assert curve(tmp_path / "init") == init
