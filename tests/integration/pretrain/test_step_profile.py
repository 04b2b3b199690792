"""Per-step memory and step-time breakdown in metrics.jsonl, from a tiny CLI run on CPU."""

from __future__ import annotations

import pytest

from tests.helpers import REPO, metrics, run_cli, tiny_overrides, two_rank_group
from tests.unit.pretrain.test_step_profile import TIMES  # shared with the unit tests

TINY = str(REPO / "configs/train/tiny.yaml")


@pytest.fixture(scope="module")
def run(tiny_data, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("profile")
    over = tiny_overrides(
        tiny_data,
        **{
            "train.steps": 6,
            "train.log_every_steps": 2,
            "train.eval_every_steps": 0,
            "train.checkpoint_every_steps": 0,
            "train.global_batch_size": 16,
        },
    )  # 2 micro-batches
    res = run_cli(["train", TINY, *over, "--run-dir", "run", "--no-progress"], cwd)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return metrics(cwd / "run")


@two_rank_group("step-profile")
def _two_rank_jobs(data):
    over = tiny_overrides(
        data,
        **{
            "train.steps": 4,
            "train.log_every_steps": 2,
            "train.eval_every_steps": 0,
            "train.checkpoint_every_steps": 0,
            "train.global_batch_size": 16,
            "deepspeed.zero_stage": 2,
        },
    )
    return [{"name": "two", "config": TINY, "overrides": over}]


def test_step_time_breakdown_is_logged_and_adds_up(run):
    assert [r["step"] for r in run] == [2, 4, 6]
    previous_wall = 0.0
    for r in run:
        assert all(r[k] > 0 for k in TIMES), r
        parts = r["time/data_s"] + r["time/fwd_bwd_s"] + r["time/optim_s"]
        assert parts <= r["time/step_s"] <= r["wall_s"] - previous_wall  # one step of the two in the window
        assert r["time/fwd_bwd_s"] > r["time/data_s"]  # two forward+backward passes vs two window reads
        assert 0 <= r["time/comm_s"] <= r["time/fwd_bwd_s"] + r["time/optim_s"]  # within the phases, not beside them
        previous_wall = r["wall_s"]


def test_communication_time_of_two_ranks(two_rank_runs):
    """Two gloo ranks under the deepspeed launcher, ZeRO-2: DeepSpeed's gradient reduce-scatter and
    parameter all-gather are timed on the log steps, and only there (a record per log step)."""
    res = two_rank_runs["step-profile"]["two"]
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    recs = metrics(res.run)
    assert [r["step"] for r in recs] == [2, 4]
    for r in recs:
        assert 0 < r["time/comm_s"] <= r["time/fwd_bwd_s"] + r["time/optim_s"], r


def test_cpu_peak_memory_is_the_process_rss(run):
    for r in run:
        assert "mem/max_allocated_gb" not in r and "mem/max_reserved_gb" not in r  # CUDA allocator peaks only on CUDA
        assert 0.05 < r["mem/max_rss_gb"] < 64  # python + torch + deepspeed: more than 50 MB, less than the machine
