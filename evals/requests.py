"""Token-level scoring and decoding for the lm-eval adapter, independent of lm-eval itself.

Why not just call `model(ids).logits`: the output projection over the vocabulary dominates the
cost of small models, and a loglikelihood request needs it only at its continuation positions.
`hidden_states` runs the backbone once per batch and the LM head only where a log-prob is read.
Truncation follows lm-eval's `hf` model exactly (keep the last `max_length + 1` tokens, drop the
last), so results agree with `lm_eval --model hf` on the exported checkpoint.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

Pair = tuple[Sequence[int], Sequence[int]]


def hidden_states(model, input_ids: torch.Tensor, kv_caches: list | None = None) -> torch.Tensor:
    """Final-norm hidden states of `models.gpt.GPT` (its forward without the LM head).

    Mirrors GPT.forward; `tests/test_eval_requests.py` checks that lm_head(hidden) equals the
    model's own logits, so a change to the model's forward cannot go unnoticed.
    """
    start = kv_caches[0].length if kv_caches else 0
    emb = model.model.embed_tokens
    cos, sin = model._rope(start, input_ids.shape[1], input_ids.device)
    cos, sin = cos.to(emb.weight.dtype), sin.to(emb.weight.dtype)
    x = emb(input_ids)
    for i, layer in enumerate(model.model.layers):
        x, _ = layer(x, cos, sin, kv_caches[i] if kv_caches else None)
    return model.model.norm(x)


def truncate_pair(context: Sequence[int], continuation: Sequence[int], max_length: int) -> tuple[list[int], int]:
    """Model input (last `max_length` tokens of context+continuation minus its last token) and
    how many continuation tokens are scored (all of them unless longer than the window)."""
    whole = (list(context) + list(continuation))[-(max_length + 1):]
    inp = whole[:-1]
    return inp, min(len(continuation), len(inp))


def batches(order: list[int], lengths: list[int], batch_size: int, max_batch_tokens: int | None) -> list[list[int]]:
    """Group indices (already sorted longest first) by count and padded-token budget."""
    out, cur, cur_max = [], [], 0
    for i in order:
        longest = max(cur_max, lengths[i])
        if cur and (len(cur) >= batch_size or (max_batch_tokens and longest * (len(cur) + 1) > max_batch_tokens)):
            out.append(cur)
            cur, longest = [], lengths[i]
        cur.append(i)
        cur_max = longest
    if cur:
        out.append(cur)
    return out


@torch.inference_mode()
def score_pairs(
    model,
    pairs: Sequence[Pair],
    max_length: int,
    device: torch.device | str = "cpu",
    batch_size: int = 32,
    max_batch_tokens: int | None = 16384,
    progress: Callable[[int], None] | None = None,
) -> list[tuple[float, bool]]:
    """(sum of log-probs of the continuation, whether it is the greedy continuation) per pair.

    Longest first, so the first batch fails fast if memory is short and padding stays small;
    identical pairs (common in multiple-choice tasks) are scored once.
    """
    results: list[tuple[float, bool] | None] = [None] * len(pairs)
    unique: dict[tuple[tuple[int, ...], tuple[int, ...]], list[int]] = {}
    for i, (ctx, cont) in enumerate(pairs):
        unique.setdefault((tuple(ctx), tuple(cont)), []).append(i)
    keys = list(unique)
    prepared = [truncate_pair(c, k, max_length) for c, k in keys]
    lengths = [len(inp) for inp, _ in prepared]
    order = sorted(range(len(keys)), key=lambda j: (-lengths[j], keys[j]))
    head = model.lm_head
    for group in batches(order, lengths, batch_size, max_batch_tokens):
        width = max(lengths[j] for j in group)
        ids = torch.zeros(len(group), width, dtype=torch.long)
        rows, cols, targets, owner = [], [], [], []
        for r, j in enumerate(group):
            inp, n = prepared[j]
            ids[r, : len(inp)] = torch.tensor(inp, dtype=torch.long)
            cont = keys[j][1][len(keys[j][1]) - n:]
            rows += [r] * n
            cols += range(len(inp) - n, len(inp))
            targets += cont
            owner += [r] * n
        h = hidden_states(model, ids.to(device))
        sel = h[torch.tensor(rows, device=h.device), torch.tensor(cols, device=h.device)]
        logp = F.log_softmax(head(sel).float(), dim=-1)
        tgt = torch.tensor(targets, device=logp.device)
        tok_lp = logp.gather(1, tgt[:, None])[:, 0].double().cpu()
        hit = (logp.argmax(-1) == tgt).cpu()
        own = torch.tensor(owner)
        sums = torch.zeros(len(group), dtype=torch.float64).index_add_(0, own, tok_lp)
        misses = torch.zeros(len(group), dtype=torch.long).index_add_(0, own, (~hit).long())
        for r, j in enumerate(group):
            res = (float(sums[r]), bool(misses[r] == 0))
            for i in unique[keys[j]]:
                results[i] = res
        if progress:
            progress(sum(len(unique[keys[j]]) for j in group))
    return results  # type: ignore[return-value]


def rolling_windows(tokens: Sequence[int], prefix_token: int, max_length: int, context_len: int = 1) -> list[Pair]:
    """Disjoint (context, continuation) windows that predict every token of `tokens` exactly once.

    The first window conditions on `prefix_token` (EOT); each later window predicts up to
    `max_length - context_len + 1` new tokens and sees the `context_len - 1` tokens before them
    plus one (lm-eval's `get_rolling_token_windows` + `make_disjoint_window`; `context_len=1` is
    lm-eval's default, larger values give overlapping windows with more context per prediction).
    """
    if not 1 <= context_len <= max_length:
        raise ValueError(f"rolling context_len must be in [1, {max_length}], got {context_len}")
    tokens = list(tokens)
    if not tokens:
        return []
    out: list[Pair] = []
    pred_len = max_length - context_len + 1
    first = min(max_length, len(tokens))
    out.append(([prefix_token], tokens[:first]))
    done = first
    while done < len(tokens):
        n = min(len(tokens) - done, pred_len)
        end = done + n
        window = tokens[max(0, end - max_length - 1): end - 1]
        out.append((window[: len(window) - (n - 1)], tokens[end - n: end]))
        done += n
    assert sum(len(c) for _, c in out) == len(tokens)  # exact token accounting (bits per byte)
    return out


@torch.inference_mode()
def generate(
    model,
    context: Sequence[int],
    max_new_tokens: int,
    decode: Callable[[list[int]], str],
    stop: Sequence[str] = (),
    eot_id: int | None = None,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> str:
    """Greedy (temperature 0) or sampled continuation of `context`, cut at the first stop string.

    One prefill, then single-token steps on the model's KV cache.
    """
    from models.gpt import KVCache

    if max_new_tokens <= 0:
        return ""
    caches = [KVCache() for _ in model.model.layers]
    ids = torch.tensor([list(context)], dtype=torch.long, device=device)
    out: list[int] = []
    text = ""
    for _ in range(max_new_tokens):
        h = hidden_states(model, ids, caches)[:, -1]
        logits = model.lm_head(h).float()[0]
        nxt = _pick(logits, temperature, top_k, top_p, generator)
        if eot_id is not None and nxt == eot_id:
            break
        out.append(nxt)
        text = decode(out)
        cut = min((text.find(s) for s in stop if s and s in text), default=-1)
        if cut >= 0:
            return text[:cut]
        ids = torch.tensor([[nxt]], dtype=torch.long, device=device)
    return text


def _pick(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None, gen) -> int:
    if not temperature or temperature <= 0:
        return int(logits.argmax())
    logits = logits / temperature
    if top_k:
        kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = logits.softmax(-1)
    if top_p is not None and top_p < 1.0:
        sp, si = probs.sort(descending=True)
        keep = sp.cumsum(0) - sp < top_p
        probs = torch.zeros_like(probs).scatter_(0, si[keep], sp[keep])
        probs = probs / probs.sum()
    return int(torch.multinomial(probs.cpu(), 1, generator=gen))
