"""Branches (`train.init_from`): a run that starts from another run's checkpoint and follows its own
schedule from there, through the CLI on the real corpus."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import REPO, metrics, run_cli, tiny_overrides

TINY = str(REPO / "configs/train/tiny.yaml")
TINY_MOE = str(REPO / "configs/train/tiny-moe.yaml")
MOE = {"model.moe.num_experts": 4, "model.moe.top_k": 2, "model.moe.d_ff": 64}
# A WSD parent: 2 warmup steps, stable to step 18, decay over the last 6; step 12 is a pinned branch point.
WSD = {
    "schedule.name": "wsd",
    "schedule.warmup_steps": 2,
    "schedule.decay_fraction": 0.25,
    "train.steps": 24,
    "train.checkpoint_at_steps": "[12]",
    "train.eval_every_steps": 0,
}
TOKENS_PER_STEP = 8 * 64
DATA: list[Path] = []  # the prepared corpus, set by the `parent` fixture


def train(cwd: Path, run: str, config: str = TINY, **over):
    return run_cli(["train", config, *tiny_overrides(DATA[0], **over), "--run-dir", run, "--no-progress"], cwd)


@pytest.fixture(scope="module")
def parent(tiny_data, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("branch")
    DATA[:] = [tiny_data]
    res = train(cwd, "parent", **WSD)
    assert res.returncode == 0, res.stdout + res.stderr
    return cwd / "parent"


def by_step(run: Path) -> dict[int, dict]:
    return {r["step"]: r for r in metrics(run)}


def test_pinned_branch_point_survives_pruning(parent):
    done = sorted(p.name for p in (parent / "checkpoints").iterdir() if (p / "COMPLETE").exists())
    assert done == ["step_12", "step_18", "step_24"]  # keep_checkpoints=2, and the pinned step 12


def test_branch_with_the_parents_schedule_reproduces_the_parent(parent):
    cwd = parent.parent
    res = train(cwd, "same", **WSD, **{"train.init_from": "parent/checkpoints/step_12"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "branched from" in res.stdout and "continuing at step 13 of 24" in res.stdout
    mine, theirs = by_step(cwd / "same"), by_step(parent)
    assert sorted(mine) == list(range(13, 25))
    for step in range(13, 25):  # bitwise: weights, optimizer state, RNG, data position and lr all carried over
        for key in ("loss", "lr", "grad_norm", "tokens"):
            assert mine[step][key] == theirs[step][key], (step, key)
    summary = json.loads((cwd / "same" / "summary.json").read_text())
    assert summary["final_loss"] == json.loads((parent / "summary.json").read_text())["final_loss"]


def test_cooldown_branch_records_its_lineage(parent):
    cwd = parent.parent
    res = train(cwd, "cool", **{**WSD, "train.steps": 16, "schedule.decay_steps": 4, "train.init_from": "parent"})
    # `parent` alone means its newest checkpoint (step 24): past this run's 16 steps
    assert res.returncode == 2 and "train.steps" in res.stderr and "step 24" in res.stderr, res.stderr
    res = train(
        cwd,
        "cool",
        **{
            **WSD,
            "train.steps": 16,
            "schedule.decay_steps": 4,
            "train.init_from": str(parent / "checkpoints" / "step_12"),
        },
    )
    assert res.returncode == 0, res.stdout + res.stderr
    mine, theirs = by_step(cwd / "cool"), by_step(parent)
    assert sorted(mine) == list(range(13, 17))
    assert mine[13]["loss"] == theirs[13]["loss"]  # the parent's weights after step 12
    peak = theirs[12]["lr"]
    lrs = [mine[s]["lr"] for s in range(13, 17)]
    # its own cooldown: decaying from its first step to min_lr_ratio (0.1) at its last, where the parent is still stable
    assert peak > lrs[0] > lrs[1] > lrs[2] > lrs[3] == pytest.approx(0.1 * peak)
    assert all(theirs[s]["lr"] == peak for s in range(13, 17))
    s = json.loads((cwd / "cool" / "summary.json").read_text())
    assert s["status"] == "done" and s["steps"] == 16 and s["tokens"] == 16 * TOKENS_PER_STEP
    assert s["init_from"] == {"run": str(parent.resolve()), "step": 12}
    assert s["shared_tokens"] == 12 * TOKENS_PER_STEP
    assert s["shared_flops"] == pytest.approx(s["flops"] * 12 / 16)
    from rundir.summary import RunSummary

    typed = RunSummary.read(cwd / "cool")  # the lineage keys are part of the summary contract
    assert typed.other == {} and typed.init_from["step"] == 12 and typed.to_dict() == s
    assert "init_from" not in json.loads((parent / "summary.json").read_text())


def test_branch_resumes_from_its_own_checkpoint(parent):
    """A branch killed after its own checkpoint continues from that one, not from its parent's
    (here the parent's branch point is even gone by then)."""
    cwd = parent.parent
    over = {**WSD, "train.init_from": "parent/checkpoints/step_12"}
    res = train(cwd, "again", **over)
    assert res.returncode == 0, res.stdout + res.stderr
    run = cwd / "again"
    full = metrics(run)
    # the state a kill after step 18's checkpoint leaves: no summary, no later checkpoint
    (run / "summary.json").unlink()
    shutil.rmtree(run / "checkpoints" / "step_24")
    moved = cwd / "moved_step_12"
    (parent / "checkpoints" / "step_12").rename(moved)
    try:
        res = train(cwd, "again", **over)
    finally:
        moved.rename(parent / "checkpoints" / "step_12")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "resumed from checkpoint step_18" in res.stdout and "branched from" not in res.stdout
    same = ("step", "loss", "lr", "grad_norm")
    assert [[r[k] for k in same] for r in metrics(run)] == [[r[k] for k in same] for r in full]
    s = json.loads((run / "summary.json").read_text())
    assert s["init_from"] == {"run": str(parent.resolve()), "step": 12} and s["shared_tokens"] == 12 * TOKENS_PER_STEP


@pytest.mark.parametrize(
    "over, key, why",
    [
        ({"model": "n200k"}, "model.", "in the parent"),
        ({"optim.lr": 0.01}, "optim.lr", "in the parent"),
        ({"train.seed": 7}, "train.seed", "in the parent"),
        ({"train.init_from": "nowhere"}, "train.init_from", "no such run directory"),
        ({"train.init_from": "parent/checkpoints/step_6"}, "train.init_from", "no such run directory"),
        ({"train.steps": 12}, "train.steps", "longer than its branch point"),
        ({"schedule.decay_steps": 16}, "schedule.decay_steps", "the lr of step"),
        ({"schedule.warmup_steps": 4}, "schedule.warmup_steps", "the lr of step"),
    ],
)
def test_bad_branch_exits_2_before_any_work(parent, over, key, why):
    cwd = parent.parent
    res = train(cwd, "bad", **{**WSD, "train.init_from": "parent/checkpoints/step_12", **over})
    assert res.returncode == 2, res.stdout + res.stderr
    assert key in res.stderr and why in res.stderr, res.stderr
    assert not (cwd / "bad" / "metrics.jsonl").exists() and not (cwd / "bad" / "checkpoints").exists()


def test_moe_branch_under_zero1_reproduces_the_parent(parent):
    cwd = parent.parent
    over = {
        **MOE,
        **WSD,
        "train.steps": 8,
        "train.checkpoint_at_steps": "[4]",
        "train.checkpoint_every_steps": 0,
        "deepspeed.zero_stage": 1,
    }
    res = train(cwd, "moe", TINY_MOE, **over)
    assert res.returncode == 0, res.stdout + res.stderr
    res = train(cwd, "moe_child", TINY_MOE, **over, **{"train.init_from": "moe/checkpoints/step_4"})
    assert res.returncode == 0, res.stdout + res.stderr
    mine, theirs = by_step(cwd / "moe_child"), by_step(cwd / "moe")
    assert sorted(mine) == [5, 6, 7, 8]
    for step in mine:
        for key in ("loss", "lr", "aux_loss", "moe/imbalance"):
            assert mine[step].get(key) == theirs[step].get(key), (step, key)


P2_OVER = {
    "train.steps": 8,
    "train.global_batch_size": 16,
    "train.checkpoint_at_steps": "[4]",
    "train.checkpoint_every_steps": 0,
    "deepspeed.zero_stage": 1,
}


@pytest.mark.slow
def test_branch_on_another_world_size_converts_into_its_own_folder(parent):
    """A 2-rank ZeRO-1 parent, a 1-rank branch: the parent's checkpoint is converted to a universal
    checkpoint inside the branch's run directory (the parent's folder is only read), and the branch
    continues the parent's losses."""
    from tests.helpers import ranks as two_ranks

    cwd = parent.parent
    over = {**WSD, **P2_OVER}
    [res] = two_ranks.launch(
        [{"argv": [TINY, *tiny_overrides(DATA[0], **over), "--run-dir", "p2", "--no-progress"]}], cwd
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    res = train(cwd, "c1", **over, **{"train.init_from": "p2/checkpoints/step_4"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "written by 2 ranks and this run has 1" in res.stdout
    assert not (cwd / "p2" / "checkpoints" / "universal").exists()  # the conversion went to c1 (pruned at its save)
    mine, theirs = by_step(cwd / "c1"), by_step(cwd / "p2")
    assert sorted(mine) == [5, 6, 7, 8]
    for step in mine:
        assert mine[step]["loss"] == pytest.approx(theirs[step]["loss"], rel=1e-5, abs=1e-6)


def test_a_resume_and_a_branch_that_change_a_fixed_key_fail_with_ddc73a7_s_messages(parent):
    """The key roles moved from hand-kept lists into the schema (pretrain/config/roles.py): a resume still
    names each non-resumable key it changes (and only those), a branch each key it must share, in the
    words ddc73a7 printed."""
    cwd = parent.parent
    resumable = {"train.log_every_steps": 3, "train.threads": 2, "wandb.project": "elsewhere", "data.workers": 2}
    res = train(cwd, "parent", **{**WSD, **resumable, "optim.lr": 0.01, "optim.beta2": 0.9})
    assert res.returncode == 2, res.stdout + res.stderr
    assert (
        "parent holds a run with a different configuration; use another --run-dir or delete it:\n"
        "  optim.beta2: 0.95 -> 0.9\n  optim.lr: 0.003 -> 0.01\n"
    ) in res.stderr, res.stderr
    res = train(cwd, "bad", **{**WSD, "train.init_from": "parent/checkpoints/step_12", "optim.lr": 0.01})
    assert res.returncode == 2, res.stdout + res.stderr
    assert "optim.lr: 0.01 here, 0.003 in the parent (a branch continues its parent's run)" in res.stderr
