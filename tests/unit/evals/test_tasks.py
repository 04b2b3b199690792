"""Input errors are clear and come before any model is loaded: unknown tasks/suites, missing
data, mismatched tokenizers; local task YAMLs resolve their data from any working directory."""

from __future__ import annotations

import json

import pytest
import yaml

from evals import tasks as T
from evals.run_eval import evaluate_run
from evals.suites import load_suite
from rundir.checkpoints import CheckpointError
from rundir.weights import load_run
from tests.helpers import tiny_model, tiny_model_config, tiny_tokenizer, write_run_dir

needs_data = pytest.mark.skipif(not T.data_root().exists(), reason="bundled eval data not found (SCALELAB_DATA_ROOT)")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tok = tiny_tokenizer()
    model = tiny_model(tiny_model_config(tok.get_vocab_size()))
    return write_run_dir(tmp_path_factory.mktemp("run") / "r", model, tok, step=7)


@pytest.fixture
def no_model_load(monkeypatch):
    import evals.adapter

    def boom(*a, **k):
        raise AssertionError("model loaded before input validation")

    monkeypatch.setattr(evals.adapter.ScalelabLM, "__init__", boom)


def test_unknown_task_is_reported_before_loading(run_dir, no_model_load):
    with pytest.raises(T.EvalError, match="unknown task.*lambada_opeani"):
        evaluate_run(run_dir, tasks="lambada_opeani,piqa")


def test_unknown_suite(run_dir, no_model_load):
    with pytest.raises(T.EvalError, match="unknown suite 'tinyy'.*standard.*tiny"):
        evaluate_run(run_dir, suite="tinyy")


def test_missing_data_names_files_and_origins(run_dir, no_model_load, tmp_path, monkeypatch):
    monkeypatch.setenv("SCALELAB_DATA_ROOT", str(tmp_path))
    with pytest.raises(T.EvalError) as e:
        evaluate_run(run_dir, tasks="piqa,blimp_anaphor_gender_agreement")
    msg = str(e.value)
    assert str(tmp_path / "evals" / "piqa_validation.jsonl") in msg and "blimp/anaphor_gender_agreement" in msg
    assert "SCALELAB_DATA_ROOT" in msg and "--online" in msg


def test_mismatched_tokenizer_is_refused(tmp_path):
    tok = tiny_tokenizer()
    model = tiny_model(tiny_model_config(tok.get_vocab_size()))
    rd = write_run_dir(tmp_path / "r", model, tok)
    meta = json.loads((rd / "tokenizer_meta.json").read_text())
    (rd / "tokenizer_meta.json").write_text(json.dumps({**meta, "vocab_size": meta["vocab_size"] + 5}))
    with pytest.raises(CheckpointError, match="tokenizer mismatch"):
        load_run(rd)
    big = tiny_tokenizer(vocab_size=400, text=(T.PROJECT_ROOT / "tests" / "conftest.py").read_text() * 3)
    big.save(str(rd / "tokenizer.json"))
    (rd / "tokenizer_meta.json").write_text(json.dumps({"vocab_size": big.get_vocab_size(), "eot_id": 0}))
    with pytest.raises(CheckpointError, match="model's vocabulary is 300"):
        load_run(rd)


def test_bad_paths(tmp_path):
    with pytest.raises(CheckpointError, match="no such"):
        load_run(tmp_path / "nope")
    (tmp_path / "checkpoints" / "step_3").mkdir(parents=True)
    with pytest.raises(CheckpointError, match="incomplete"):
        load_run(tmp_path / "checkpoints" / "step_3")


@needs_data
def test_materialised_tasks_use_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = T.resolve_tasks(["lambada_openai", "winogrande", "blimp_adjunct_island", "tinyshakespeare_bpb"])
    try:
        for name in ("lambada_openai.yaml", "blimp_adjunct_island.yaml"):
            text = (p.include_dir / name).read_text()
            assert "@" not in text.replace("@DATA_ROOT@", "")  # placeholders replaced
            files = yaml.safe_load(text)["dataset_kwargs"]["data_files"]
            assert all(v.startswith("/") and __import__("os").path.exists(v) for v in files.values())
        assert (p.include_dir / "preprocess_winogrande.py").exists()
        tm = p.task_manager()
        assert {"lambada_openai", "winogrande", "blimp_adjunct_island"} <= set(tm.all_tasks)
    finally:
        p.cleanup()


@needs_data
def test_suites_resolve():
    tiny = load_suite("tiny").entries()
    assert any(e.task.startswith("blimp_") for e in tiny)
    assert {e.task for e in tiny} >= {"lambada_openai", "tinyshakespeare_bpb"}
    assert {e.task: e.limit for e in tiny}["tinyshakespeare_bpb"] is None
    std = {e.task for e in load_suite("standard").entries()}
    assert std == {"hellaswag", "piqa", "arc_easy", "arc_challenge", "winogrande", "lambada_openai"}
    for s in ("tiny", "standard"):
        T.resolve_tasks([e.task for e in load_suite(s).entries()]).cleanup()  # all data present
    assert len(T.expand(["blimp"])) == 67
