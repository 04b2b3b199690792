"""The trainer made of parts: a callback's hooks in order with their steps, its state through a
checkpoint, old checkpoints (state under the pre-callback keys) still resuming exactly, a NaN on
the last micro-batch of a step stopping with the weights untouched, and the metric recorder."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tests.helpers import REPO, run_cli, tiny_overrides
from tests.helpers import trainer as train_inprocess

TINY = str(REPO / "configs/train/tiny.yaml")


def inprocess(run_dir: Path, overrides: list[str], env: dict | None = None, **spec) -> dict:
    """The trainer with a recording callback, built in this process (tests/helpers/trainer.py)."""
    import contextlib
    import io

    from tests.helpers.inprocess import isolated

    run_dir.parent.mkdir(parents=True, exist_ok=True)
    out = io.StringIO()
    with (
        isolated(run_dir.parent, env, unset=("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")),
        contextlib.redirect_stdout(out),
    ):
        res = train_inprocess.main({"config": TINY, "overrides": overrides, "run_dir": str(run_dir), **spec})
    return res | {"stdout": out.getvalue()}


def steps_of(events: list, hook: str) -> list[int]:
    return [e[1] for e in events if e[0] == hook]


def test_hooks_run_in_order_with_their_steps(tiny_data, tmp_path):
    over = tiny_overrides(
        tiny_data,
        **{
            "train.steps": 4,
            "train.log_every_steps": 2,
            "train.eval_every_steps": 0,
            "train.checkpoint_every_steps": 2,
        },
    )
    r = inprocess(tmp_path / "run", over)
    assert r["rc"] == 0
    step = lambda n: [["pre_step", n], ["post_train_batch", n]]  # noqa: E731
    assert r["events"] == [
        ["pre_train", 0],
        *step(1),
        ["post_step", 1],
        # the checkpointer (priority 100) saves in its post_step, before this callback's post_step
        *step(2),
        ["log_metrics", 2, 2],
        ["post_checkpoint_saved", 2, "step_2"],
        ["post_step", 2],
        *step(3),
        ["post_step", 3],
        # the last step is saved once, at post_train
        *step(4),
        ["log_metrics", 4, 4],
        ["post_step", 4],
        ["post_checkpoint_saved", 4, "step_4"],
        ["post_train", 4, "done"],
        ["close"],
    ]
    assert r["loaded"] is None and r["steps_seen"] == 4


def test_callback_state_round_trips_through_a_checkpoint(tiny_data, tmp_path):
    over = tiny_overrides(
        tiny_data, **{"train.steps": 8, "train.eval_every_steps": 0, "train.checkpoint_every_steps": 4}
    )
    first = inprocess(tmp_path / "run", over, env={"SCALELAB_FAULT_NAN_STEP": "5"})  # fails in step 6
    assert first["rc"] == 1
    assert first["events"][-2:] == [["on_error", 6, "TrainingFailed"], ["close"]]
    assert "post_train" not in [e[0] for e in first["events"]]
    again = inprocess(tmp_path / "run", over)
    assert again["rc"] == 0 and "resumed from checkpoint step_4" in again["stdout"]
    assert again["loaded"] == {"steps_seen": 4}  # what it held at the step-4 save
    assert steps_of(again["events"], "pre_step") == [5, 6, 7, 8] and again["steps_seen"] == 8


def test_nan_on_the_last_micro_batch_stops_and_the_step_is_never_applied(tiny_data, tmp_path):
    """Two micro-batches per step; only the second one's loss is NaN (the first ran its backward):
    exit 1, status failed, and the weights in memory are still the step-4 checkpoint's."""
    over = tiny_overrides(
        tiny_data,
        **{
            "train.steps": 8,
            "train.global_batch_size": 16,
            "train.eval_every_steps": 0,
            "train.checkpoint_every_steps": 4,
        },
    )
    r = inprocess(
        tmp_path / "run",
        over,
        env={"SCALELAB_FAULT_NAN_STEP": "4", "SCALELAB_FAULT_NAN_MICRO": "1"},
        compare_checkpoint=4,
    )
    assert r["rc"] == 1
    assert "non-finite loss (nan) at step 5" in r["stdout"]
    assert r["weights_equal_checkpoint"] is True
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["status"] == "failed" and s["steps"] == 4 and "non-finite loss" in s["error"]
    assert not (tmp_path / "run" / "checkpoints" / "step_8").exists()


def test_checkpoint_with_pre_callback_state_keys_resumes_exactly(tiny_data, tmp_path):
    """Checkpoints written before callbacks kept their own state hold the noise probe's EMAs under
    `noise_probe` and the last evaluation under `last_val`: they still resume bit for bit."""
    over = tiny_overrides(
        tiny_data,
        **{
            "train.steps": 8,
            "train.eval_every_steps": 4,
            "train.checkpoint_every_steps": 4,
            "train.noise_scale_every_steps": 2,
        },
    )
    ref = run_cli(["train", TINY, *over, "--run-dir", "ref", "--no-progress"], tmp_path)
    assert ref.returncode == 0, ref.stdout[-2000:] + ref.stderr[-2000:]
    args = ["train", TINY, *over, "--run-dir", "run", "--no-progress"]
    assert run_cli(args, tmp_path, env={"SCALELAB_FAULT_NAN_STEP": "5"}).returncode == 1
    f = tmp_path / "run" / "checkpoints" / "step_4" / "mp_rank_00_model_states.pt"
    sd = torch.load(f, map_location="cpu", weights_only=False)
    client = sd["scalelab"]
    states = client.pop("callbacks")
    client["noise_probe"] = states["noise_scale"]
    client["last_val"] = states["run_summary"]["last_val"]
    torch.save(sd, f)
    res = run_cli(args, tmp_path)
    assert res.returncode == 0 and "resumed from checkpoint step_4" in res.stdout, (
        res.stdout[-2000:] + res.stderr[-2000:]
    )
    keys = ("step", "loss", "grad_norm", "grad_noise_scale", "val_loss")

    def rows(run):
        lines = (tmp_path / run / "metrics.jsonl").read_text().splitlines()
        return [tuple(json.loads(ln).get(k) for k in keys) for ln in lines]

    assert rows("run") == rows("ref")
    assert rows("run")[-1][3] is not None  # the probe's EMAs came back from the old key
