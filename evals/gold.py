"""The loss of the correct (gold) continuation per task, from the loglikelihoods lm-eval computed.

The loss-to-accuracy chain (OLMo's ladder, Bhagia et al. 2024) predicts a task's accuracy from
its *task loss*: how unlikely the model finds the right answer. lm-eval 0.4.13 reports `acc` and
`acc_norm` but no loss of the gold answer (its `likelihood` metric is a pass-through without an
aggregation), so it is computed here from the per-document samples of the same lm-eval call
(`log_samples=True`): no second pass over the model.

Per document, with ll = the summed log-probability (nats) of the gold continuation given its
context, exactly the number lm-eval compared against the other choices:
- `gold_bpb`  = -ll / (ln 2 * UTF-8 bytes of the gold continuation)   (OLMo's "bpb" task loss)
- `gold_nats` = -ll / tokens of the gold continuation                  (nats per token, the
  training loss's unit; tokens as the model's lm-eval tokenisation splits context/continuation)
The task's value is the mean over documents (as OLMo averages its per-document bpb), `stderr`
the standard error of that mean. The continuation is the string lm-eval scores, target
delimiter included (" Susan revealed herself." in BLiMP, " signs" in LAMBADA).
Multiple-choice tasks (the gold choice: `doc_to_target`, or `doc_to_text` for multiple-input
tasks like WinoGrande; the first of several gold answers) and loglikelihood tasks (their one
continuation) get both; rolling-loglikelihood tasks already report `bits_per_byte`.
Each record carries `chance`: the mean over documents of 1 / number of choices (multiple
choice), 0 for a loglikelihood task's greedy-match accuracy.
"""

from __future__ import annotations

import math

LN2 = math.log(2.0)
METRICS = ("gold_bpb", "gold_nats")


def gold_records(out: dict, task_obj, lm, suite: str, limit) -> list[dict]:
    """`gold_bpb` / `gold_nats` records of one task from `simple_evaluate(..., log_samples=True)`.

    `task_obj` is the built lm-eval task (None for a group: nothing is computed); `lm` gives the
    continuation's token count (lm-eval's TemplateLM tokenisation), else `gold_nats` is left out.
    """
    if task_obj is None or isinstance(task_obj, str):
        return []
    kind = getattr(task_obj, "OUTPUT_TYPE", None)
    if kind not in ("multiple_choice", "loglikelihood"):
        return []
    name = task_obj.config.task
    samples = (out.get("samples") or {}).get(name) or []
    seen: set = set()
    bpb, nats, chance = [], [], []
    for s in samples:
        if s.get("doc_id") in seen:  # one entry per filter: the loglikelihoods are the same
            continue
        seen.add(s.get("doc_id"))
        g = _gold(task_obj, s, kind)
        if g is None:
            continue
        (ctx, cont), ll, n_choices = g
        nbytes = len(cont.encode("utf-8"))
        if nbytes == 0 or not math.isfinite(ll):
            continue
        bpb.append(-ll / (LN2 * nbytes))
        ntok = _continuation_tokens(lm, ctx, cont)
        if ntok:
            nats.append(-ll / ntok)
        chance.append(1.0 / n_choices if n_choices else 0.0)
    if not bpb:
        return []
    base = {
        "task": name,
        "num_fewshot": (out.get("n-shot") or {}).get(name),
        "limit": limit,
        "suite": suite,
        "status": "ok",
        "chance": sum(chance) / len(chance),
    }
    recs = [
        {
            **base,
            "metric": "gold_bpb",
            **_mean(bpb),
            "unit": "bits per byte of the gold continuation, mean over documents",
        }
    ]
    if len(nats) == len(bpb):
        recs.append(
            {
                **base,
                "metric": "gold_nats",
                **_mean(nats),
                "unit": "nats per token of the gold continuation, mean over documents",
            }
        )
    return [
        {
            k: r[k]
            for k in (
                "task",
                "metric",
                "value",
                "stderr",
                "n",
                "num_fewshot",
                "limit",
                "suite",
                "status",
                "chance",
                "unit",
            )
        }
        for r in recs
    ]


def _gold(task, sample: dict, kind: str):
    """((context, continuation), loglikelihood, number of choices or None) of the gold answer."""
    args = sample.get("arguments") or []
    resps = sample.get("filtered_resps") or []
    if not args or len(resps) < 1:
        return None
    if kind == "loglikelihood":
        return tuple(args[0]), _ll(resps[0]), None
    doc = sample["doc"]
    choices = task.doc_to_choice(doc)
    gold = task.doc_to_text(doc) if getattr(task, "multiple_input", False) else sample.get("target")
    if isinstance(gold, list):
        gold = next((g for g in gold if isinstance(g, int) and 0 <= g < len(choices)), None)
    elif isinstance(gold, str):
        gold = choices.index(gold) if gold in choices else None
    if not isinstance(gold, int) or not 0 <= gold < min(len(choices), len(args), len(resps)):
        return None
    return tuple(args[gold]), _ll(resps[gold]), len(choices)


def _ll(resp) -> float:
    v = resp[0] if isinstance(resp, (tuple, list)) else resp
    return float(v)


def _continuation_tokens(lm, context: str, continuation: str) -> int | None:
    """Tokens of the continuation as lm-eval's TemplateLM splits the pair (an empty context is
    the prefix token; trailing context spaces move to the continuation)."""
    if not hasattr(lm, "_encode_pair") or not hasattr(lm, "tok_encode"):
        return None
    try:
        if context == "":
            enc = lm.tok_encode(continuation)
            return len(enc) - 1 if enc[:1] == [lm.prefix_token_id] else len(enc)
        return len(lm._encode_pair(context, continuation)[1])
    except Exception:  # a model without a usable tokenizer: no per-token loss
        return None


def _mean(xs: list[float]) -> dict:
    n = len(xs)
    m = sum(xs) / n
    se = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1) / n) if n > 1 else None
    return {"value": m, "stderr": se, "n": n}
