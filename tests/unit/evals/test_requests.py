"""Each lm-eval request type against log-probs computed by hand from a full forward pass."""

from __future__ import annotations

import math

import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from evals import requests as R
from evals.adapter import ScalelabLM
from evals.forward import hidden_states
from evals.request_batching import prefix_groups
from tests.helpers import EOT, tiny_model, tiny_model_config, tiny_tokenizer

SEQ = 24


@pytest.fixture(scope="module")
def setup():
    tok = tiny_tokenizer()
    model = tiny_model(tiny_model_config(tok.get_vocab_size(), seq_len=SEQ))
    lm = ScalelabLM.from_model(model, tok, tok.token_to_id(EOT), SEQ, batch_size=3)
    return tok, model, lm


def enc(tok, s):
    return tok.encode(s, add_special_tokens=False).ids


@torch.no_grad()
def hand_logprob(model, ctx: list[int], cont: list[int], max_len: int = SEQ) -> tuple[float, bool]:
    """log P(cont | ctx) from one full forward over the last max_len+1 tokens."""
    whole = (ctx + cont)[-(max_len + 1) :]
    logits = model(torch.tensor([whole[:-1]])).logits[0].double().log_softmax(-1)
    n = len(cont)
    rows = logits[-n:]
    lp = sum(rows[i, t].item() for i, t in enumerate(cont))
    greedy = all(rows[i].argmax().item() == t for i, t in enumerate(cont))
    return lp, greedy


def req(kind, *args):
    return Instance(request_type=kind, doc={}, arguments=args, idx=0)


def test_hidden_states_equal_model_logits(setup):
    _, model, _ = setup
    ids = torch.randint(0, model.cfg.vocab_size, (2, 17))
    assert torch.allclose(model.lm_head(hidden_states(model, ids)), model(ids).logits, atol=1e-6)


def test_loglikelihood_matches_hand_computed(setup):
    tok, model, lm = setup
    cases = [
        ("The cat sat on", " the mat."),
        ("Who should Derek ", "hug"),
        ("A bird", " sings in the tree"),
        ("The dogs sit", " on the mats. The cat sat on the mat."),
    ]
    out = lm.loglikelihood([req("loglikelihood", c, x) for c, x in cases])
    for (ctx, cont), (lp, greedy) in zip(cases, out):
        # boundary: trailing spaces move to the continuation, the whole string is encoded then split
        n_sp = len(ctx) - len(ctx.rstrip())
        c, x = ctx[: len(ctx) - n_sp], ctx[len(ctx) - n_sp :] + cont
        whole, c_ids = enc(tok, c + x), enc(tok, c)
        ref, ref_greedy = hand_logprob(model, c_ids, whole[len(c_ids) :])
        assert lp == pytest.approx(ref, abs=1e-4)
        assert greedy == ref_greedy
        assert lp < 0


def test_empty_context_conditions_on_eot(setup):
    tok, model, lm = setup
    ((lp, _),) = lm.loglikelihood([req("loglikelihood", "", "Who should Derek hug?")])
    ref, _ = hand_logprob(model, [tok.token_to_id(EOT)], enc(tok, "Who should Derek hug?"))
    assert lp == pytest.approx(ref, abs=1e-4)


def test_truncation_keeps_the_last_window(setup):
    tok, model, lm = setup
    ctx = "First Citizen: Before we proceed any further, hear me speak. " * 4
    ids = enc(tok, ctx.rstrip())
    assert len(ids) > 2 * SEQ
    ((lp, _),) = lm.loglikelihood([req("loglikelihood", ctx.rstrip(), " All: Speak, speak.")])
    cont = enc(tok, ctx.rstrip() + " All: Speak, speak.")[len(ids) :]
    ref, _ = hand_logprob(model, ids[-(SEQ + 1 - len(cont)) :], cont)  # only what fits is seen
    assert lp == pytest.approx(ref, abs=1e-4)


def test_is_greedy_true_for_argmax_continuation(setup):
    tok, model, lm = setup
    ctx = enc(tok, "The cat sat on")
    seq = list(ctx)
    with torch.no_grad():
        for _ in range(3):
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    res = R.score_pairs(model, [(ctx, seq[len(ctx) :]), (ctx, [(seq[-1] + 1) % 300] + seq[len(ctx) + 1 :])], SEQ)
    assert res[0][1] is True and res[1][1] is False


def test_batching_and_duplicates_do_not_change_scores(setup):
    tok, model, _ = setup
    pairs = [(enc(tok, "The cat"), enc(tok, " sat on the mat" * k)) for k in (1, 2, 3)] * 2
    a = R.score_pairs(model, pairs, SEQ, batch_size=1)
    b = R.score_pairs(model, pairs, SEQ, batch_size=7, max_batch_tokens=40)
    for (x, _), (y, _) in zip(a, b):
        assert x == pytest.approx(y, abs=1e-5)


@pytest.mark.parametrize("context_len", [1, 5, SEQ])
def test_rolling_windows_account_every_token_once(context_len):
    tokens = list(range(1, 80))
    ours = R.rolling_windows(tokens, 0, SEQ, context_len)
    ref = [make_disjoint_window(w) for w in get_rolling_token_windows(tokens, 0, SEQ, context_len)]
    assert ours == ref
    assert [t for _, c in ours for t in c] == tokens
    for ctx, cont in ours:
        assert len(ctx) + len(cont) - 1 <= SEQ


@pytest.mark.parametrize("context_len", [1, 8])
def test_loglikelihood_rolling_matches_hand_computed(setup, context_len):
    tok, model, lm = setup
    text = "Who should Derek hug after shocking Richard? These men were walking to the store." * 2
    lm.rolling_context = context_len
    try:
        (total,) = lm.loglikelihood_rolling([req("loglikelihood_rolling", text)])
    finally:
        lm.rolling_context = 1
    ids = enc(tok, text)
    eot = tok.token_to_id(EOT)
    # hand: token i is predicted from the preceding window, restarting every pred_len tokens
    pred_len = SEQ - context_len + 1
    ref, i = 0.0, 0
    while i < len(ids):
        n = min(SEQ, len(ids)) if i == 0 else min(pred_len, len(ids) - i)
        ctx = [eot] if i == 0 else ids[max(0, i + n - SEQ - 1) : i]
        ref += hand_logprob(model, ctx, ids[i : i + n])[0]
        i += n
    assert total == pytest.approx(ref, abs=1e-4)
    assert len(ids) > SEQ  # several windows


@torch.no_grad()
def hand_greedy(model, ids: list[int], n: int) -> list[int]:
    seq = list(ids)
    for _ in range(n):
        seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    return seq[len(ids) :]


def test_generate_until_greedy_matches_full_forward(setup):
    tok, model, lm = setup
    ctx = "The cat sat on"
    (text,) = lm.generate_until([req("generate_until", ctx, {"until": ["\u2603"], "max_gen_toks": 6})])
    expected = hand_greedy(model, enc(tok, ctx), 6)
    if tok.token_to_id(EOT) in expected:
        expected = expected[: expected.index(tok.token_to_id(EOT))]
    assert text == tok.decode(expected)


def test_generate_until_stops_at_stop_sequence_and_max_tokens(setup):
    tok, model, lm = setup
    full = tok.decode(hand_greedy(model, enc(tok, "A bird"), 8))
    stop = full[3:5]
    (cut,) = lm.generate_until([req("generate_until", "A bird", {"until": [stop], "max_gen_toks": 8})])
    assert cut == full[: full.find(stop)]
    (one,) = lm.generate_until([req("generate_until", "A bird", {"until": [], "max_gen_toks": 1})])
    assert len(enc(tok, one)) <= 1


def test_generate_until_sampling_is_seeded(setup):
    tok, model, _ = setup
    args = {"until": [], "max_gen_toks": 5, "do_sample": True, "temperature": 1.0}
    a = ScalelabLM.from_model(model, tok, 0, SEQ, seed=7).generate_until([req("generate_until", "The", args)])
    b = ScalelabLM.from_model(model, tok, 0, SEQ, seed=7).generate_until([req("generate_until", "The", args)])
    assert a == b


@torch.no_grad()
def test_kv_cache_decode_matches_full_forward(setup):
    from models.gpt import KVCache

    _, model, _ = setup
    ids = torch.randint(1, 300, (1, 10))
    caches = [KVCache() for _ in model.model.layers]
    hidden_states(model, ids[:, :7], caches)
    for t in range(7, 10):
        h = hidden_states(model, ids[:, t : t + 1], caches)
    full = model(ids).logits[0, -1]
    assert math.isclose(float((model.lm_head(h)[0, -1] - full).abs().max()), 0.0, abs_tol=1e-5)


@pytest.mark.parametrize("moe", [None, dict(num_experts=4, top_k=2, renormalize=True)])
def test_shared_context_packing_matches_hand_computed(setup, moe):
    """Multiple-choice requests share one pass over their context; scores must not change."""
    tok = setup[0]
    model = setup[1] if moe is None else tiny_model(tiny_model_config(tok.get_vocab_size(), seq_len=SEQ, moe=moe))
    ctx = enc(tok, "Question: The cat sat on\nAnswer:")
    conts = [enc(tok, " the mat."), enc(tok, " a tree while the children play"), enc(tok, " it"), enc(tok, " the mat.")]
    pairs = [(ctx, c) for c in conts] + [([0], enc(tok, "Who should Derek hug?"))]
    got = R.score_pairs(model, pairs, SEQ, batch_size=2)
    for (c, x), (lp, greedy) in zip(pairs, got):
        ref, ref_greedy = hand_logprob(model, c, x)
        assert lp == pytest.approx(ref, abs=1e-4) and greedy == ref_greedy


def test_request_mix_matches_hand_computed(setup):
    """Every path of the planner at once, with batches small enough to split both passes:
    choices of different lengths under one context (two share their first words); a lone
    request whose whole input is that context (it joins the group, all its targets read in pass
    1); a duplicate; a minimal pair after an empty context (EOT); two contexts that differ only
    at their end (their branches hold context tokens too); a context longer than the window
    (left-truncated) and a continuation longer than the window (only its last tokens scored)."""
    tok, model, _ = setup
    q = enc(tok, "Who should Derek hug?")
    pairs = [(q, enc(tok, x)) for x in (" the mat.", " the mats in the tree", " a bird", " the")]
    pairs += [(q[:-2], q[-2:] + enc(tok, " the")), (q, enc(tok, " a bird"))]
    pairs += [([0], enc(tok, "The dogs sit on the mats.")), ([0], enc(tok, "The dog sits on the mats."))]
    speak = enc(tok, " All: Speak.")
    pairs += [(enc(tok, "Before we proceed."), speak), (enc(tok, "Before we proceed!"), speak)]
    long_ctx = enc(tok, "First Citizen: Before we proceed any further, hear me speak. " * 3)
    pairs += [(long_ctx, speak), (long_ctx, enc(tok, " All: Resolved."))]
    pairs += [(q, enc(tok, " the cat sat on the mat while the children play in the tree"))]
    plan = prefix_groups(pairs, SEQ)[2]
    members = [(p, br, tg) for p, ms in plan.items() for _, br, tg in ms]
    assert len(plan[tuple(q)]) == 5 and sum(not br for _, br, _ in plan[tuple(q)]) == 2
    assert any(p[0] == 0 and len(p) > 2 and 0 < len(br) < len(tg) for p, br, tg in members)  # the minimal pair
    assert any(len(br) >= len(tg) for _, br, tg in members)  # context tokens in a branch
    for bs, budget in ((1, None), (2, 40), (64, 16384)):
        got = R.score_pairs(model, pairs, SEQ, batch_size=bs, max_batch_tokens=budget)
        for (c, x), (lp, greedy) in zip(pairs, got):
            n = min(len(x), SEQ)
            ref, ref_greedy = hand_logprob(model, (list(c) + list(x))[:-n], list(x)[-n:])
            assert lp == pytest.approx(ref, abs=1e-4) and greedy == ref_greedy


@pytest.mark.skipif(not __import__("evals.tasks").tasks.data_root().exists(), reason="bundled eval data not found")
def test_boundary_fast_path_equals_whole_string_encoding():
    """The adapter encodes ' word' continuations separately; on real task text that must give
    exactly lm-eval's encode(context + continuation)[len(encode(context)):]."""
    import json

    from evals.tasks import data_root

    text = (data_root() / "lambada_openai_test.jsonl").read_text()
    tok = tiny_tokenizer(vocab_size=500, text=text[:200000])
    lm = ScalelabLM.from_model(tiny_model(tiny_model_config(tok.get_vocab_size())), tok, 0, SEQ)
    assert lm._split_safe
    docs = [json.loads(x)["text"] for x in text.splitlines()[:300]]
    reqs = [req("loglikelihood", d.rsplit(" ", 1)[0], " " + d.rsplit(" ", 1)[1]) for d in docs]
    reqs += [req("loglikelihood", "Question: why?\nAnswer:", " Because 42 !"), req("loglikelihood", "it's", " 's a'")]
    fast = [(c, x) for _, c, x in _captured(lm, reqs)]
    slow = [TemplateLMpair(lm, *r.args) for r in reqs]
    assert fast == slow


def TemplateLMpair(lm, ctx, cont):
    from lm_eval.api.model import TemplateLM

    return TemplateLM._encode_pair(lm, ctx, cont)


def _captured(lm, reqs):
    seen = []
    orig = lm._loglikelihood_tokens
    lm._loglikelihood_tokens = lambda new_reqs, **k: seen.extend(new_reqs) or [(0.0, True)] * len(new_reqs)
    try:
        lm.loglikelihood(reqs)
    finally:
        lm._loglikelihood_tokens = orig
    return seen
