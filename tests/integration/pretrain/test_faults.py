"""Training fault paths through `scalelab train`: unloadable checkpoints stop the run without deleting
anything, a ZeRO run resumes on another world size, and non-finite gradients never reach the weights."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO, run_cli, tiny_overrides, two_rank_group

TINY = str(REPO / "configs/train/tiny.yaml")


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@two_rank_group("zero1-2-1-2")
def _two_rank_jobs(data):
    """The uninterrupted 2-rank run, and 2 ranks that stop after step 5 (a NaN loss: checkpoint step_4 kept)."""
    over = tiny_overrides(data, **ZERO1_212)
    return [
        {"name": "ref", "config": TINY, "overrides": over},
        {"name": "run", "config": TINY, "overrides": over, "env": {"SCALELAB_FAULT_NAN_STEP": "5"}},
    ]


@pytest.mark.parametrize("optim", ["adamw", "muon"])
def test_no_loadable_checkpoint_stops_with_exit_1_and_deletes_nothing(optim, tiny_data, tmp_path):
    over = {"wandb.mode": "offline", "train.eval_every_steps": 0, "optim.name": optim}
    args = ["train", TINY, *tiny_overrides(tiny_data, **over), "--run-dir", "run", "--no-progress"]
    res = run_cli(args, tmp_path, env={"SCALELAB_FAULT_NAN_STEP": "14"})  # stops after step 14 with step_6, step_12
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    run = tmp_path / "run"
    for step in (6, 12):  # a flaky file system: both checkpoints damaged
        f = run / "checkpoints" / f"step_{step}" / "mp_rank_00_model_states.pt"
        f.write_bytes(f.read_bytes()[:100])
    before = tree_digest(run)
    res = run_cli(args, tmp_path)
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    out = res.stdout
    assert "none of the complete checkpoints could be loaded" in out
    for step in (6, 12):  # each one named, with the reason
        assert re.search(rf"checkpoints/step_{step}: \w+Error: .*(central directory|zip archive)", out), out[-3000:]
    assert "resumed from" not in out and tree_digest(run) == before  # nothing deleted, rewritten or added
    assert len(metrics(run)) == 14 and len(list((run / "wandb").glob("offline-run-*"))) == 1


ZERO1_212 = {
    "train.steps": 12,
    "train.global_batch_size": 16,
    "train.checkpoint_every_steps": 4,
    "train.eval_every_steps": 0,
    "deepspeed.zero_stage": 1,
}


@pytest.mark.slow
def test_zero1_resumes_across_world_sizes_2_1_2(tiny_data, two_rank_runs):
    """2 ranks -> 1 rank -> 2 ranks (ZeRO-1: optimizer state partitioned over the ranks) continues
    the uninterrupted 2-rank run's losses; each change goes through a universal checkpoint."""
    from tests.helpers import ranks as two_ranks

    over = tiny_overrides(tiny_data, **ZERO1_212)
    ref, r = two_rank_runs["zero1-2-1-2"]["ref"], two_rank_runs["zero1-2-1-2"]["run"]
    assert ref.returncode == 0, ref.stdout[-3000:] + ref.stderr[-3000:]
    assert r.returncode == 1 and "non-finite loss" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    cwd = r.run.parent
    # 1 rank resumes from the 2-rank checkpoint, stops after step 9 (checkpoint step_8 by 1 rank)
    r = run_cli(["train", TINY, *over, "--run-dir", "run", "--no-progress"], cwd, env={"SCALELAB_FAULT_NAN_STEP": "9"})
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert "checkpoint step_4 was written by 2 ranks and this run has 1" in r.stdout
    assert "resumed from checkpoint step_4" in r.stdout
    # 2 ranks again finish the run from the 1-rank checkpoint
    [r] = two_ranks.launch([{"argv": [TINY, *over, "--run-dir", "run", "--no-progress"]}], cwd)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "checkpoint step_8 was written by 1 ranks and this run has 2" in r.stdout
    assert "resumed from checkpoint step_8" in r.stdout
    got, want = metrics(cwd / "run"), metrics(cwd / "ref")
    assert [m["step"] for m in got] == list(range(1, 13))
    for a, b in zip(got, want):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-6)
    assert json.loads((cwd / "run" / "summary.json").read_text())["world_size"] == 2


@pytest.mark.parametrize("optim,stage", [("adamw", 0), ("adamw", 2), ("muon", 1)])
def test_inf_gradient_at_checkpoint_step_is_skipped_and_counted(optim, stage, tiny_data, tmp_path):
    from rundir.weights import read_state_dict

    over = tiny_overrides(
        tiny_data,
        **{"train.steps": 12, "train.eval_every_steps": 0, "deepspeed.zero_stage": stage, "optim.name": optim},
    )
    res = run_cli(
        ["train", TINY, *over, "--run-dir", "run", "--no-progress"], tmp_path, env={"SCALELAB_FAULT_INF_GRAD_STEP": "5"}
    )  # step 6, a checkpoint step
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "non-finite gradient norm at step 6: update skipped (1 skipped so far)" in res.stdout
    recs = metrics(tmp_path / "run")
    assert [r["skipped_steps"] for r in recs] == [0] * 5 + [1] * 7
    assert all(r["loss"] is not None and r["loss"] < 7 for r in recs)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["skipped_steps"] == 1
    for step in (6, 12):  # both checkpoints complete and finite
        sd = read_state_dict(tmp_path / "run" / "checkpoints" / f"step_{step}")
        assert all(bool(v.isfinite().all()) for v in sd.values() if v.is_floating_point())


def test_inf_gradient_with_stop_policy_fails_before_the_checkpoint(tiny_data, tmp_path):
    over = tiny_overrides(tiny_data, **{"train.steps": 12, "train.eval_every_steps": 0, "train.nonfinite_grad": "stop"})
    res = run_cli(
        ["train", TINY, *over, "--run-dir", "run", "--no-progress"], tmp_path, env={"SCALELAB_FAULT_INF_GRAD_STEP": "5"}
    )
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    assert (
        "non-finite gradient norm at step 6 (1 skipped, train.nonfinite_grad is stop); stopped without saving"
        in res.stdout
    )
    run = tmp_path / "run"
    s = json.loads((run / "summary.json").read_text())
    assert s["status"] == "failed" and s["steps"] == 5 and "non-finite gradient norm" in s["error"]
    assert not (run / "checkpoints" / "step_6" / "COMPLETE").exists()


def test_noise_probe_at_a_checkpoint_step_resumes_exactly_with_aux_free_router(tiny_data, tmp_path):
    """A noise-scale probe on the checkpoint step must not leave router load behind for the next
    aux-free bias update (that load is not in the checkpoint): the resumed run matches bit for bit.
    Small micro-batches and many probe batches so that the probe's load flips the bias update's
    sign for some expert after step 4 (checked: without the fix losses differ from step 6)."""
    moe = {
        "model.moe.num_experts": 8,
        "model.moe.top_k": 2,
        "model.moe.d_ff": 64,
        "model.moe.router": "aux_free_bias",
        "model.moe.bias_update_rate": 0.01,
        "train.steps": 8,
        "train.micro_batch_size": 2,
        "train.global_batch_size": 2,
        "train.eval_every_steps": 0,
        "train.noise_scale_every_steps": 2,
        "train.noise_scale_batches": 8,
        "train.checkpoint_every_steps": 4,
    }
    over = tiny_overrides(tiny_data, **moe)
    moe_cfg = str(REPO / "configs/train/tiny-moe.yaml")
    ref = run_cli(["train", moe_cfg, *over, "--run-dir", "ref", "--no-progress"], tmp_path)
    assert ref.returncode == 0, ref.stdout[-2000:] + ref.stderr[-2000:]
    args = ["train", moe_cfg, *over, "--run-dir", "run", "--no-progress"]
    res = run_cli(args, tmp_path, env={"SCALELAB_FAULT_NAN_STEP": "5"})  # stops in step 6: step_4 (a probe step) kept
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    res = run_cli(args, tmp_path)
    assert res.returncode == 0 and "resumed from checkpoint step_4" in res.stdout, (
        res.stdout[-2000:] + res.stderr[-2000:]
    )
    keys = (
        "step",
        "loss",
        "grad_norm",
        "grad_noise_scale",
        "moe/bias_norm",
        "moe/layer0/load/expert0",
        "moe/imbalance",
    )
    got = [tuple(r.get(k) for k in keys) for r in metrics(tmp_path / "run")]
    want = [tuple(r.get(k) for k in keys) for r in metrics(tmp_path / "ref")]
    assert got == want  # bitwise, step for step


def test_disk_full_during_a_checkpoint_keeps_the_last_good_one_and_resumes(tiny_data, tmp_path):
    """A file system that fills during the third checkpoint: exit 1 with a message (no traceback), the
    partial write removed, step_12 still complete; with space again the same command resumes from it."""
    ckpt_bytes = 660_000  # one tiny-model checkpoint (weights + Adam moments) is ~650 KB
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    m = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={int(2.6 * ckpt_bytes) + 300_000}", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if m.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {m.stderr.strip()}")
    try:
        args = [
            "train",
            TINY,
            *tiny_overrides(tiny_data, **{"train.eval_every_steps": 0}),
            "--run-dir",
            str(mnt / "run"),
            "--no-progress",
        ]
        res = run_cli(args, tmp_path)
        out = res.stdout + res.stderr
        assert res.returncode == 1, out[-3000:]
        assert "Traceback" not in out, out[-3000:]
        m = re.search(
            r"checkpoint step_(\d+) could not be written .*is the "
            r"disk full\?\).*last good checkpoint step_(\d+) is kept",
            out,
        )
        assert m, out[-3000:]
        failed, kept = int(m.group(1)), int(m.group(2))
        ckpts = mnt / "run" / "checkpoints"
        assert not (ckpts / f"step_{failed}").exists() and (ckpts / f"step_{kept}" / "COMPLETE").exists()
        assert [r["step"] for r in metrics(mnt / "run")][:kept] == list(range(1, kept + 1))
        subprocess.run(["mount", "-o", f"remount,size={64 << 20}", str(mnt)], check=True)
        res = run_cli(args, tmp_path)
        assert res.returncode == 0 and f"resumed from checkpoint step_{kept}" in res.stdout, res.stdout[-2000:]
        assert [r["step"] for r in metrics(mnt / "run")] == list(range(1, 25))
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
