"""lm-eval's reference `hf` model on the export of a tied mup model (exported untied, multipliers
folded) gives the same log-probabilities as our adapter on the run directory."""

from __future__ import annotations

import math

import pytest

from evals import tasks as T
from tests.helpers import tiny_model, tiny_model_config, tiny_tokenizer, write_run_dir

TASKS = ["lambada_openai", "piqa"]


@pytest.mark.skipif(not T.data_root().exists(), reason="bundled eval data not found (SCALELAB_DATA_ROOT)")
def test_lm_eval_log_probs_of_exported_mup_model_equal_ours(tmp_path):
    import lm_eval

    from evals.adapter import ScalelabLM
    from evals.export import export_checkpoint

    tok = tiny_tokenizer(vocab_size=400, text=(T.data_root() / "piqa_validation.jsonl").read_text()[:60000])
    cfg = tiny_model_config(
        tok.get_vocab_size(), seq_len=128, d_model=64, tie_embeddings=True, parametrization="mup", mup_base_width=16
    )
    rd = write_run_dir(tmp_path / "run", tiny_model(cfg), tok, step=4)
    export_checkpoint(rd, tmp_path / "hf")
    plan = T.resolve_tasks(TASKS)
    try:
        kw = dict(tasks=TASKS, task_manager=plan.task_manager(), limit=6, bootstrap_iters=0, verbosity="ERROR")
        ours = lm_eval.simple_evaluate(model=ScalelabLM(path=str(rd), device="cpu", batch_size=4), **kw)["results"]
        ref = lm_eval.simple_evaluate(
            model="hf", model_args=f"pretrained={tmp_path / 'hf'},dtype=float32", device="cpu", batch_size=4, **kw
        )["results"]
    finally:
        plan.cleanup()
    compared = 0
    for task in TASKS:
        for key, value in ref[task].items():
            if "," in key and "stderr" not in key and isinstance(value, (int, float)):
                assert math.isclose(ours[task][key], value, rel_tol=1e-4, abs_tol=1e-4), (task, key)
                compared += 1
    assert compared >= 2  # lambada's perplexity and accuracy, piqa's accuracies: log-prob sums compared
