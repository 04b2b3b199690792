"""Run-directory evaluation end to end: a tiny run trained through the CLI with in-loop
evaluation (one task made to fail: training must finish), then `scalelab eval --suite tiny`
writing evals/<step>.json and eval/... W&B entries; crash/timeout isolation of the child."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from evals import tasks as T
from tests.helpers import REPO, run_cli, tiny_overrides
from tests.unit.evals.test_run import _job  # shared with the unit tests

pytestmark = pytest.mark.skipif(not T.data_root().exists(), reason="bundled eval data not found")


STEPS, CKPT_EVERY = 6, 3


def wandb_bytes(run_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in run_dir.glob("wandb/*run-*/run-*.wandb"))


@pytest.fixture(scope="module")
def trained(tiny_data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("evalrun")
    suite = tmp / "mini.yaml"
    suite.write_text(yaml.safe_dump({"limit": 4, "tasks": ["blimp_anaphor_number_agreement", "lambada_openai"]}))
    rd = tmp / "run"
    tokens_per_ckpt = 8 * 64 * CKPT_EVERY
    over = tiny_overrides(
        tiny_data,
        **{
            "train.steps": STEPS,
            "train.checkpoint_every_steps": CKPT_EVERY,
            "train.eval_every_steps": STEPS,
            "wandb.mode": "offline",
            "eval.suite": str(suite),
            "eval.every_tokens": tokens_per_ckpt,
            "eval.threads": 1,
        },
    )
    r = run_cli(
        ["train", str(REPO / "configs/train/tiny.yaml"), *over, "--run-dir", str(rd), "--no-progress"],
        cwd=tmp,
        env={"SCALELAB_EVAL_FAULT": "task:lambada_openai", "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return rd, r


def test_inloop_eval_survives_failing_task(trained):
    rd, r = trained
    summary = json.loads((rd / "summary.json").read_text())
    assert summary["status"] == "done" and summary["steps"] == STEPS
    for step in (CKPT_EVERY, STEPS):
        doc = json.loads((rd / "evals" / f"{step}.json").read_text())
        assert [f["task"] for f in doc["failed"]] == ["lambada_openai"]
        accs = [x for x in doc["results"] if x["task"] == "blimp_anaphor_number_agreement" and x["metric"] == "acc"]
        assert len(accs) == 1 and 0 <= accs[0]["value"] <= 1 and accs[0]["n"] == 4
        assert doc["eval_s"] > 0 and doc["step"] == step and doc["tokens"] == step * 8 * 64
    # evaluation time is accounted separately from training throughput
    assert (
        summary["eval_s"] >= sum(json.loads((rd / "evals" / f"{s}.json").read_text())["eval_s"] for s in (3, 6)) * 0.9
    )
    assert "eval at step 3" in r.stdout + r.stderr
    data = wandb_bytes(rd)
    assert b"eval/blimp_anaphor_number_agreement/acc" in data and b"eval/lambada_openai/failed" in data


def test_suite_run_writes_results_and_wandb(trained):
    rd, _ = trained
    r = run_cli(["eval", str(rd), "--suite", "tiny", "--limit", "3", "--threads", "1"], cwd=rd.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((rd / "evals" / f"{STEPS}.json").read_text())
    assert "tiny" in doc["suites"] and doc["lm_eval_version"] and doc["checkpoint"].endswith(f"step_{STEPS}")
    got = {(x["task"], x["metric"]) for x in doc["results"]}
    assert {
        ("lambada_openai", "acc"),
        ("lambada_openai", "perplexity"),
        ("tinyshakespeare_bpb", "bits_per_byte"),
        ("blimp_determiner_noun_agreement_1", "acc"),
        ("blimp", "acc"),
    } <= got
    assert doc["failed"] == []  # the in-loop failure of lambada was replaced by this run's result
    bpb = next(x for x in doc["results"] if x["metric"] == "bits_per_byte")
    assert 0 < bpb["value"] < 10 and bpb["n"] == 3
    assert doc["config"]["suite"]["name"] == "tiny" and doc["config"]["limit_override"] == 3
    assert b"eval/tinyshakespeare_bpb/bits_per_byte" in wandb_bytes(rd)


def test_train_refuses_unknown_eval_suite_before_training(tiny_data, tmp_path):
    over = tiny_overrides(tiny_data, **{"eval.suite": "no_such_suite"})
    r = run_cli(["train", str(REPO / "configs/train/tiny.yaml"), *over, "--run-dir", str(tmp_path / "r")], cwd=tmp_path)
    assert r.returncode == 2 and "unknown suite 'no_such_suite'" in r.stderr
    assert not (tmp_path / "r" / "checkpoints").exists()


def test_inloop_in_process_mode_records_task_failure(tmp_path, monkeypatch):
    from evals.config import EvalSection
    from evals.inloop import EVALUATOR

    monkeypatch.setenv("SCALELAB_EVAL_FAULT", "task:lambada_openai")
    job, logs = _job(tmp_path / "run", 4)
    threads = torch.get_num_threads()
    EVALUATOR.evaluate(
        EvalSection(
            suite=None, tasks=["blimp_anaphor_number_agreement", "lambada_openai"], limit=2, subprocess=False, threads=1
        ),
        job,
    )
    doc = json.loads((tmp_path / "run" / "evals" / "4.json").read_text())
    assert [f["task"] for f in doc["failed"]] == ["lambada_openai"]
    assert any(x["task"] == "blimp_anaphor_number_agreement" for x in doc["results"])
    assert torch.get_num_threads() == threads
    assert "eval at step 4" in logs[-1] and "1 task(s) failed" in logs[-1]


def test_zero3_checkpoint_loads_and_exports(tiny_data, tmp_path):
    """ZeRO-3 keeps only placeholders in the module states; the loader merges the shards."""
    from rundir.weights import load_run

    over = tiny_overrides(
        tiny_data,
        **{"train.steps": 2, "train.checkpoint_every_steps": 0, "deepspeed": "zero3", "train.eval_every_steps": 0},
    )
    r = run_cli(
        ["train", str(REPO / "configs/train/tiny.yaml"), *over, "--run-dir", str(tmp_path / "z3"), "--no-progress"],
        cwd=tmp_path,
        env={"OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert not (tmp_path / "z3/checkpoints/step_2/mp_rank_00_model_states.pt").exists()
    loaded = load_run(tmp_path / "z3")
    assert loaded.step == 2 and all(p.numel() > 0 for p in loaded.model.parameters())
    out = run_cli(["export", "hf", str(tmp_path / "z3"), str(tmp_path / "hf")], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32, local_files_only=True)
    ids = torch.randint(0, 500, (2, 32))
    with torch.no_grad():
        assert (hf(ids).logits - loaded.model(ids).logits).abs().max() < 1e-4


def test_results_go_to_the_runs_own_wandb_run_beside_another_active_one(tmp_path, monkeypatch):
    """`scalelab eval` in a process where another W&B run is active (a notebook's, one a failed run left
    behind): the results go to the evaluated run's own W&B run, not into the active one."""
    import wandb

    from evals.results import log_to_wandb

    monkeypatch.setenv("WANDB_SILENT", "true")
    other = wandb.init(mode="offline", dir=str(tmp_path / "other"), id="otherrun", project="p")
    try:
        rd = tmp_path / "run"
        rd.mkdir()
        (rd / "wandb_id").write_text("ownrun01\n")
        assert log_to_wandb(rd, 4, 4096, {"eval/own_task/acc": 0.5}, 1.0, mode="offline")
    finally:
        other.finish()
    assert b"eval/own_task/acc" in wandb_bytes(rd)
    assert b"eval/own_task/acc" not in b"".join(p.read_bytes() for p in (tmp_path / "other").rglob("*.wandb"))
