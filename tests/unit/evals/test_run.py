"""Run-directory evaluation end to end: a tiny run trained through the CLI with in-loop
evaluation (one task made to fail: training must finish), then `scalelab eval --suite tiny`
writing evals/<step>.json and eval/... W&B entries; crash/timeout isolation of the child."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

from evals import tasks as T

pytestmark = pytest.mark.skipif(not T.data_root().exists(), reason="bundled eval data not found")


def _job(rd: Path, step: int):
    """A run directory with a checkpoint at `step`, and the job the trainer would hand the evaluator."""
    from pretrain.checkpoint.evaluators import EvalJob
    from tests.helpers import tiny_model, tiny_model_config, tiny_tokenizer, write_run_dir

    tok = tiny_tokenizer()
    write_run_dir(rd, tiny_model(tiny_model_config(tok.get_vocab_size())), tok, step=step)
    logs = []
    return EvalJob(rd / "checkpoints" / f"step_{step}", rd, step, step * 100, False, logs.append), logs


def test_trainer_finds_the_lm_eval_evaluator_by_entry_point():
    """pretrain imports nothing from evals: the evaluator and the `eval:` schema come from the entry point."""
    from evals.config import EvalSection
    from evals.inloop import EVALUATOR
    from pretrain.checkpoint.evaluators import evaluator
    from pretrain.config.schema import TrainConfig

    assert evaluator() is EVALUATOR
    assert EvalSection in typing.get_args(TrainConfig.model_fields["eval"].annotation)


@pytest.mark.parametrize("fault,timeout", [("crash", 600.0), ("", 0.5)])
def test_inloop_child_crash_or_timeout_is_recorded(tmp_path, monkeypatch, fault, timeout):
    from evals.config import EvalSection
    from evals.inloop import EVALUATOR

    monkeypatch.setenv("SCALELAB_EVAL_FAULT", fault)
    job, logs = _job(tmp_path / "run", 5)
    section = EvalSection(suite=None, tasks=["blimp_anaphor_number_agreement"], limit=2, timeout_s=timeout)
    EVALUATOR.evaluate(section, job)  # must not raise
    doc = json.loads((tmp_path / "run" / "evals" / "5.json").read_text())
    assert doc["failed"][0]["task"] == "*"
    assert ("137" in doc["failed"][0]["error"]) if fault else ("timed out" in doc["failed"][0]["error"])
    assert doc["eval_s"] > 0 and "FAILED" in logs[-1]
    assert not EVALUATOR.done(section, tmp_path / "run", 5)
