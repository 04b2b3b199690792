"""Our adapter equals lm-eval's reference `hf` model on the exported checkpoint (same tasks,
same limits, local task data): every metric to 1e-4, on the CPU and (`cuda` mark, skipped without
CUDA; benchmarks/gpu_check.py runs it on a GPU node) with both models on the GPU."""

from __future__ import annotations

import math

import pytest
import torch

from evals import tasks as T
from tests.helpers import tiny_model, tiny_model_config, tiny_tokenizer, write_run_dir

TASKS = ["blimp_anaphor_number_agreement", "lambada_openai", "piqa", "winogrande", "arc_easy", "tinyshakespeare_bpb"]


CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")],
)


@pytest.mark.skipif(not T.data_root().exists(), reason="bundled eval data not found (SCALELAB_DATA_ROOT)")
@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_adapter_agrees_with_lm_eval_hf(device, tmp_path):
    import lm_eval

    from evals.adapter import ScalelabLM
    from evals.export import export_checkpoint

    tok = tiny_tokenizer(vocab_size=400, text=(T.data_root() / "piqa_validation.jsonl").read_text()[:60000])
    model = tiny_model(tiny_model_config(tok.get_vocab_size(), seq_len=128))
    rd = write_run_dir(tmp_path / "run", model, tok, step=4)
    export_checkpoint(rd, tmp_path / "hf")
    resolved = T.resolve_tasks(TASKS)
    try:
        tm = resolved.task_manager()
        kw = dict(tasks=TASKS, task_manager=tm, limit=6, bootstrap_iters=0, log_samples=False, verbosity="ERROR")
        ours = lm_eval.simple_evaluate(model=ScalelabLM(path=str(rd), device=device, batch_size=4), **kw)["results"]
        ref = lm_eval.simple_evaluate(
            model="hf", model_args=f"pretrained={tmp_path / 'hf'},dtype=float32", device=device, batch_size=4, **kw
        )["results"]
    finally:
        resolved.cleanup()
    compared = set()
    for task in TASKS:
        for key, value in ref[task].items():
            if "," not in key or "stderr" in key or not isinstance(value, (int, float)):
                continue
            assert math.isclose(ours[task][key], value, rel_tol=1e-4, abs_tol=1e-4), (task, key, ours[task][key], value)
            compared.add(task)
    assert compared == set(TASKS)
