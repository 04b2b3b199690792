"""ZeRO-3 partitioned construction (`deepspeed.zero_init`): two CPU ranks under the `deepspeed`
launcher each hold about half of the parameters right after the model is built, and the run
trains exactly like the unpartitioned build (the same initial weights: every step's loss and
gradient norm are bitwise equal, the first step's loss being that of the initial weights), and
resumes exactly. One MoE model covers what partitioned construction must respect: tied
embeddings, grouped K/V heads, routed experts (stacked weights), a shared expert and a router
(dense models at ZeRO-3 build the same way: tests/test_train_zero.py, test_moe_training.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import REPO, metrics, tiny_overrides, two_rank_group

TINY_MOE = str(REPO / "configs/train/tiny-moe.yaml")
MODEL = {
    "model.tie_embeddings": "true",
    "model.n_kv_heads": 2,
    "model.moe.num_experts": 4,
    "model.moe.top_k": 2,
    "model.moe.d_ff": 64,
    "model.moe.num_shared_experts": 1,
}
SHARES = re.compile(
    r"ZeRO-3 partitioned init: parameter elements held per rank after the build: "
    r"rank 0 ([\d,]+) \([\d.]+%\), rank 1 ([\d,]+) \([\d.]+%\) of ([\d,]+)"
)


def curve(run: Path) -> list[tuple]:
    return [(r["step"], r["loss"], r["grad_norm"], r.get("aux_loss"), r.get("val_loss")) for r in metrics(run)]


def zero3_overrides(data: Path) -> list[str]:
    return tiny_overrides(
        data,
        **MODEL,
        **{
            "train.steps": 6,
            "train.checkpoint_every_steps": 3,
            "train.global_batch_size": 16,
            "train.eval_every_steps": 6,
            "deepspeed.zero_stage": 3,
        },
    )


@two_rank_group("zero-init")
def _two_rank_jobs(data):
    """Partitioned build, full build, and the partitioned run resumed (as if killed after its step-3
    checkpoint: a copy without step 6 and the summary)."""
    over = zero3_overrides(data)
    return [
        {"name": "init", "config": TINY_MOE, "overrides": over},
        {"name": "full", "config": TINY_MOE, "overrides": over + ["deepspeed.zero_init=false"]},
        {
            "name": "init-resumed",
            "config": TINY_MOE,
            "overrides": over,
            "copy": ["init", "init-resumed"],
            "remove": ["init-resumed/checkpoints/step_6", "init-resumed/summary.json"],
        },
    ]


@pytest.mark.slow
def test_two_rank_zero3_builds_partitioned_and_trains_like_the_full_build(two_rank_runs):
    runs = two_rank_runs["zero-init"]
    for res in runs.values():
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    res = runs["init"]
    held0, held1, total = (int(x.replace(",", "")) for x in SHARES.search(res.stdout + res.stderr).groups())
    print(f"parameter elements held: rank 0 {held0:,}, rank 1 {held1:,} of {total:,}")
    assert held0 + held1 >= total and max(held0, held1) <= 0.51 * total  # each rank about half (plus padding)
    full = runs["full"]
    assert "partitioned init" not in full.stdout + full.stderr
    init = curve(res.run)
    assert len(init) == 6 and init[-1][1] < init[0][1] and init[-1][4] is not None
    assert init == curve(full.run)  # bitwise: the same initial weights and the same training
    # Resume: as if killed after the step-3 checkpoint; the partitioned build loads it and continues exactly.
    again = runs["init-resumed"]
    assert "resumed from checkpoint step_3" in again.stdout + again.stderr
    assert curve(again.run) == init
