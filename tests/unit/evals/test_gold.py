"""`evals/<step>.json` carries the gold continuation's loss (gold_bpb, gold_nats) for
multiple-choice and loglikelihood tasks, equal to a direct computation with the model's own
forward pass; the existing records are unchanged."""

from __future__ import annotations

import gzip
import json
import math

import pytest
import torch

from evals import tasks as T
from tests.helpers import EOT, tiny_model, tiny_model_config, tiny_tokenizer, write_run_dir

pytestmark = pytest.mark.skipif(not T.data_root().exists(), reason="bundled eval data not found")
LIMIT = 4


def _rows(path, n):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(next(f)) for _ in range(n)]


def _nll(model, tok, context: str, continuation: str) -> tuple[float, int]:
    """-log p(continuation | context) in nats and its token count, with full logits (no adapter):
    the pair is encoded whole and split after the context's tokens; an empty context is EOT."""
    if context:
        ctx = tok.encode(context).ids
        cont = tok.encode(context + continuation).ids[len(ctx) :]
    else:
        ctx, cont = [tok.token_to_id(EOT)], tok.encode(continuation).ids
    ids = torch.tensor([ctx + cont])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids[:, :-1]).logits.float(), -1)[0]
    tgt = ids[0, len(ctx) :]
    return -float(logp[len(ctx) - 1 :].gather(1, tgt[:, None]).sum()), len(cont)


def test_gold_losses_match_a_direct_computation(tmp_path):
    from evals.run_eval import evaluate_run

    tok = tiny_tokenizer(vocab_size=400, text=(T.data_root() / "piqa_validation.jsonl").read_text()[:60000])
    model = tiny_model(tiny_model_config(tok.get_vocab_size(), seq_len=1024))  # no truncation
    rd = write_run_dir(tmp_path / "run", model, tok, step=4)
    tasks = "blimp_anaphor_number_agreement,lambada_openai,winogrande,tinyshakespeare_bpb"
    evaluate_run(rd, tasks=tasks, limit=LIMIT, wandb=False, batch_size=4, log=lambda *_: None)
    doc = json.loads((rd / "evals" / "4.json").read_text())
    got = {(r["task"], r["metric"]): r for r in doc["results"]}

    pairs = {  # the gold (context, continuation) per document, from the stock task definitions
        "blimp_anaphor_number_agreement": [
            ("", " " + r["sentence_good"])
            for r in _rows(T.data_root() / "blimp/anaphor_number_agreement.jsonl.gz", LIMIT)
        ],
        "lambada_openai": [
            (" ".join(r["text"].split(" ")[:-1]), " " + r["text"].split(" ")[-1])
            for r in _rows(T.data_root() / "lambada_openai_test.jsonl", LIMIT)
        ],
        "winogrande": [],
    }
    for r in _rows(T.data_root() / "winogrande_validation.jsonl", LIMIT):
        i = r["sentence"].index("_")
        option = r["option1"] if r["answer"] == "1" else r["option2"]
        pairs["winogrande"].append((r["sentence"][:i] + option, " " + r["sentence"][i + 1 :].strip()))
    for task, ps in pairs.items():
        nll = [_nll(model, tok, c, x) for c, x in ps]
        bpb = [n / (math.log(2) * len(x.encode())) for (n, _), (_, x) in zip(nll, ps)]
        nats = [n / k for n, k in nll]
        assert got[(task, "gold_bpb")]["value"] == pytest.approx(sum(bpb) / LIMIT, rel=1e-5), task
        assert got[(task, "gold_nats")]["value"] == pytest.approx(sum(nats) / LIMIT, rel=1e-5), task
        se = (sum((b - sum(bpb) / LIMIT) ** 2 for b in bpb) / (LIMIT - 1) / LIMIT) ** 0.5
        assert got[(task, "gold_bpb")]["stderr"] == pytest.approx(se, rel=1e-4)
        assert got[(task, "gold_bpb")]["n"] == LIMIT
    assert got[("blimp_anaphor_number_agreement", "gold_bpb")]["chance"] == 0.5
    assert got[("winogrande", "gold_bpb")]["chance"] == 0.5
    assert got[("lambada_openai", "gold_bpb")]["chance"] == 0.0  # greedy-match accuracy: no guessing floor
    # the BLiMP aggregate carries the gold loss too; rolling tasks keep their own bits_per_byte only
    assert got[("blimp", "gold_bpb")]["value"] == pytest.approx(
        got[("blimp_anaphor_number_agreement", "gold_bpb")]["value"]
    )
    assert ("tinyshakespeare_bpb", "gold_bpb") not in got and ("tinyshakespeare_bpb", "bits_per_byte") in got
    # the records that existed before are unchanged in shape
    acc = got[("lambada_openai", "acc")]
    assert set(acc) == {"task", "metric", "value", "stderr", "n", "num_fewshot", "limit", "suite", "status"}
