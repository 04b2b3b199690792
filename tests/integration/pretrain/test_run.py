"""End-to-end training through the CLI on the real corpus: files, loss, resume, signals, NaN."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO, metrics, run_cli, start, tiny_overrides, two_rank_group, wait_for_step

TINY = str(REPO / "configs/train/tiny.yaml")
COMPARED = ("step", "tokens", "loss", "lr", "grad_norm", "val_loss", "val_bpb")


def comparable(run: Path) -> list[tuple]:
    return [tuple(r.get(k) for k in COMPARED) for r in metrics(run)]


@pytest.fixture(scope="module")
def reference(tiny_data, tmp_path_factory):
    """One uninterrupted 60-step run that interrupted runs must reproduce exactly."""
    cwd = tmp_path_factory.mktemp("ref")
    res = run_cli(
        ["train", TINY, *tiny_overrides(tiny_data, **{"train.steps": 60}), "--run-dir", "ref", "--no-progress"], cwd
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return cwd / "ref"


def test_run_directory_contract_and_loss_falls(reference):
    summary = json.loads((reference / "summary.json").read_text())
    assert summary["status"] == "done" and summary["steps"] == 60
    assert summary["tokens"] == 60 * 8 * 64
    assert summary["params"] == 104688 and summary["non_embedding_params"] == 55536
    assert summary["flops"] == pytest.approx(summary["tokens"] * 552960)
    for key in ("final_loss", "final_val_loss", "final_val_bpb", "wall_s", "tokens_per_s", "mfu"):
        assert summary[key] > 0, key
    from rundir.summary import SCHEMA_VERSION, RunSummary

    typed = RunSummary.read(reference)  # every key the trainer writes is a RunSummary field
    assert typed.schema_version == SCHEMA_VERSION and typed.other == {} and typed.to_dict() == summary
    recs = metrics(reference)
    assert [r["step"] for r in recs] == list(range(1, 61))
    for key in ("step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "mfu"):
        assert all(r[key] is not None for r in recs), key
    assert {r["step"] for r in recs if "val_loss" in r} == {12, 24, 36, 48, 60}
    first, last = sum(r["loss"] for r in recs[:3]) / 3, sum(r["loss"] for r in recs[-3:]) / 3
    assert first > 6.0 and last < first - 1.0  # ln(512) = 6.24 at init, clearly learning on real text
    cfg = yaml.safe_load((reference / "config.yaml").read_text())
    assert cfg["model"]["vocab_size"] == 512 and cfg["train"]["steps"] == 60
    done = sorted(p.name for p in (reference / "checkpoints").iterdir() if (p / "COMPLETE").exists())
    assert done == ["step_54", "step_60"]  # keep_checkpoints=2
    assert (reference / "tokenizer.json").exists()


def test_rerun_of_finished_run_is_a_noop(reference):
    res = run_cli(
        [
            "train",
            TINY,
            *tiny_overrides(
                Path(json.loads((reference / "tokenizer_meta.json").read_text())["data_dir"]), **{"train.steps": 60}
            ),
            "--run-dir",
            str(reference),
        ],
        reference.parent,
    )
    assert res.returncode == 0 and "already done" in res.stdout


def test_changed_config_in_existing_run_dir_is_refused(reference, tiny_data):
    res = run_cli(
        [
            "train",
            TINY,
            *tiny_overrides(tiny_data, **{"train.steps": 60, "optim.lr": 0.01}),
            "--run-dir",
            str(reference),
        ],
        reference.parent,
    )
    assert res.returncode == 2 and "optim.lr: 0.003 -> 0.01" in res.stderr


def test_exact_resume_after_sigkill_and_corrupt_checkpoint(reference, tiny_data, tmp_path):
    args = ["train", TINY, *tiny_overrides(tiny_data, **{"train.steps": 60}), "--run-dir", "run", "--no-progress"]
    proc = start(args, tmp_path)
    wait_for_step(tmp_path / "run", 20, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    run = tmp_path / "run"
    assert not (run / "summary.json").exists()
    ckpts = sorted((int(p.name[5:]), p) for p in (run / "checkpoints").iterdir() if (p / "COMPLETE").exists())
    assert len(ckpts) == 2
    # Damage the newest checkpoint and leave a half-written one: resume must fall back, not crash.
    newest = ckpts[-1][1] / "mp_rank_00_model_states.pt"
    newest.write_bytes(newest.read_bytes()[:100])
    (run / "checkpoints" / "step_999").mkdir()
    res = run_cli(args, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"checkpoint step_{ckpts[-1][0]} could not be loaded" in res.stdout
    assert f"resumed from checkpoint step_{ckpts[0][0]}" in res.stdout
    assert comparable(run) == comparable(reference)  # bitwise, step for step


def test_sigterm_checkpoints_exits_and_wandb_run_continues(reference, tiny_data, tmp_path):
    args = [
        "train",
        TINY,
        *tiny_overrides(tiny_data, **{"train.steps": 60, "wandb.mode": "offline", "train.checkpoint_every_steps": 0}),
        "--run-dir",
        "run",
        "--no-progress",
    ]
    proc = start(args, tmp_path)
    wait_for_step(tmp_path / "run", 15, proc)
    os.killpg(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, out
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "preempted"
    stopped = summary["steps"]
    assert (run / "checkpoints" / f"step_{stopped}" / "COMPLETE").exists()
    assert "received SIGTERM" in out
    res = run_cli(args, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"resumed from checkpoint step_{stopped}" in res.stdout
    assert json.loads((run / "summary.json").read_text())["status"] == "done"
    assert comparable(run) == comparable(reference)
    # W&B offline: both attempts wrote to the same W&B run id.
    run_id = (run / "wandb_id").read_text().strip()
    offline = sorted((run / "wandb").glob("offline-run-*"))
    assert len(offline) == 2 and all(p.name.endswith(run_id) for p in offline)
    assert all((p / f"run-{run_id}.wandb").stat().st_size > 0 for p in offline)


def test_nan_loss_fails_cleanly_and_keeps_last_checkpoint(tiny_data, tmp_path):
    args = ["train", TINY, *tiny_overrides(tiny_data), "--run-dir", "run", "--no-progress"]
    res = run_cli(args, tmp_path, env={"SCALELAB_FAULT_NAN_STEP": "14"})
    assert res.returncode == 1
    assert "non-finite loss (nan) at step 15" in res.stdout
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and "non-finite loss" in summary["error"] and summary["steps"] == 14
    done = sorted(p.name for p in (run / "checkpoints").iterdir() if (p / "COMPLETE").exists())
    assert done == ["step_12", "step_6"]
    assert (run / "checkpoints" / "latest").read_text().strip() == "step_12"
    res = run_cli(args, tmp_path)  # the fault is gone: resume from the last good checkpoint
    assert res.returncode == 0 and "resumed from checkpoint step_12" in res.stdout


ZERO1_TWO = {"train.steps": 12, "train.global_batch_size": 16, "deepspeed.zero_stage": 1}


@two_rank_group("train-run")
def _two_rank_jobs(data):
    return [{"name": "two", "config": TINY, "overrides": tiny_overrides(data, **ZERO1_TWO)}]


def test_two_ranks_under_deepspeed_launcher_match_one_rank(tiny_data, tmp_path, two_rank_runs):
    over = tiny_overrides(tiny_data, **ZERO1_TWO)
    one = run_cli(["train", TINY, *over, "--run-dir", "one", "--no-progress"], tmp_path)
    assert one.returncode == 0, one.stderr
    two = two_rank_runs["train-run"]["two"]
    assert two.returncode == 0, two.stdout[-3000:] + two.stderr[-3000:]
    s1, s2 = (json.loads((r / "summary.json").read_text()) for r in (tmp_path / "one", two.run))
    assert s2["world_size"] == 2 and s1["world_size"] == 1
    for a, b in zip(metrics(tmp_path / "one"), metrics(two.run)):
        assert a["step"] == b["step"]
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5, abs=1e-5)
    assert s2["final_val_loss"] == pytest.approx(s1["final_val_loss"], rel=1e-5)


def test_gradient_noise_scale_is_logged_and_resumed(tiny_data, tmp_path):
    over = tiny_overrides(
        tiny_data,
        **{
            "train.steps": 12,
            "train.noise_scale_every_steps": 2,
            "train.log_every_steps": 2,
            "train.checkpoint_every_steps": 6,
        },
    )
    res = run_cli(["train", TINY, *over, "--run-dir", "run", "--no-progress"], tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    recs = metrics(tmp_path / "run")
    values = [r.get("grad_noise_scale") for r in recs]
    assert len(values) == 6 and all(v is not None for v in values[2:])
    # B_simple is in tokens: positive and finite once the EMAs have a few measurements
    assert all(0 < v < 1e9 for v in values[2:])


def test_width_scaled_lr_is_what_trains(tiny_data, tmp_path):
    over = tiny_overrides(
        tiny_data,
        **{
            "train.steps": 8,
            "optim.lr": 1e-2,
            "optim.width_lr_ref": 24,
            "schedule.name": "constant",
            "schedule.warmup_steps": 0,
            "train.checkpoint_every_steps": 0,
        },
    )
    res = run_cli(["train", TINY, *over, "--run-dir", "run", "--no-progress"], tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    # n50k is 48 wide: half the reference width's lr
    assert s["lr"] == 1e-2 and s["peak_lr"] == pytest.approx(5e-3)
    assert all(r["lr"] == pytest.approx(5e-3) for r in metrics(tmp_path / "run"))
