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


def _layers(model, ids: torch.Tensor, pos: torch.Tensor, past=None, past_valid=None, keep_kv: bool = False):
    """Backbone over `ids` at positions `pos`, optionally attending to per-row cached keys/values.

    `past`: per layer (k, v) of shape (B, n_kv, P, hd) (a context already run), `past_valid`:
    (B, P) which of them are real. Without `past` this is the model's causal forward. Mirrors
    Block/Attention.forward (tests compare against the model's own logits).
    """
    from models.layers import apply_rope

    emb = model.model.embed_tokens
    cos_t, sin_t = model._rope(0, int(pos.max()) + 1, ids.device)
    cos = cos_t.to(emb.weight.dtype)[pos][:, None]
    sin = sin_t.to(emb.weight.dtype)[pos][:, None]
    b, t = ids.shape
    mask = None
    if past is not None:
        causal = torch.ones(t, t, dtype=torch.bool, device=ids.device).tril()
        mask = torch.cat([past_valid[:, None, :].expand(b, t, -1), causal.expand(b, t, t)], dim=-1)[:, None]
    x = emb(ids)
    kv = []
    for i, layer in enumerate(model.model.layers):
        a = layer.self_attn
        h = layer.input_layernorm(x)
        q = a.q_proj(h).view(b, t, a.n_heads, a.hd).transpose(1, 2)
        k = a.k_proj(h).view(b, t, a.n_kv, a.hd).transpose(1, 2)
        v = a.v_proj(h).view(b, t, a.n_kv, a.hd).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if keep_kv:
            kv.append((k, v))
        if past is not None:
            k, v = torch.cat([past[i][0], k], dim=2), torch.cat([past[i][1], v], dim=2)
        if a.n_kv != a.n_heads:
            k = k.repeat_interleave(a.n_heads // a.n_kv, dim=1)
            v = v.repeat_interleave(a.n_heads // a.n_kv, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
        x = x + a.o_proj(y.transpose(1, 2).reshape(b, t, -1))
        m = layer.mlp(layer.post_attention_layernorm(x))
        x = x + (m[0] if isinstance(m, tuple) else m)
    return model.model.norm(x), kv


def _padded(seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(x) for x in seqs)
    ids = torch.tensor([list(x) + [0] * (width - len(x)) for x in seqs], dtype=torch.long)
    return ids, torch.arange(width).expand(len(seqs), width)


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

    Identical pairs are scored once. Pairs whose truncated inputs agree up to the continuation
    (the choices of a multiple-choice question) share one pass over that context: pass 1 runs
    the distinct contexts and keeps their keys/values, pass 2 runs only the continuation tokens
    against them. Contexts go longest first (the first batch fails fast if memory is short).
    `batch_size` counts distinct contexts per pass.
    """
    results: list[tuple[float, bool] | None] = [None] * len(pairs)
    unique: dict[tuple[tuple[int, ...], tuple[int, ...]], list[int]] = {}
    for i, (ctx, cont) in enumerate(pairs):
        unique.setdefault((tuple(ctx), tuple(cont)), []).append(i)
    groups: dict[tuple[int, ...], list] = {}
    for key in unique:
        inp, n = truncate_pair(key[0], key[1], max_length)
        if n == 0:
            for i in unique[key]:
                results[i] = (0.0, True)
            continue
        cut = len(inp) - n + 1  # the prefix ends with the token that predicts the first target
        groups.setdefault(tuple(inp[:cut]), []).append((key, list(inp[cut:]), list(key[1][len(key[1]) - n:])))
    prefixes = list(groups)
    sizes = [len(p) + max(len(b) for _, b, _ in groups[p]) * len(groups[p]) for p in prefixes]
    order = sorted(range(len(prefixes)), key=lambda j: (-len(prefixes[j]), -sizes[j], prefixes[j]))
    head = model.lm_head
    for batch in batches(order, sizes, batch_size, max_batch_tokens):
        pre = [list(prefixes[j]) for j in batch]
        ids, pos = _padded(pre)
        h1, kv = _layers(model, ids.to(device), pos.to(device), keep_kv=True)
        lens = torch.tensor([len(p) for p in pre])
        first = h1[torch.arange(len(pre), device=h1.device), (lens - 1).to(h1.device)]  # predicts target 0
        items = [(r, key, br, tg) for r, j in enumerate(batch) for key, br, tg in groups[prefixes[j]]]
        feats = [first[[r for r, _, _, _ in items]]]
        owner = [(key, 0) for _, key, _, _ in items]
        targets = [tg[0] for _, _, _, tg in items]
        branched = [(r, key, br, tg) for r, key, br, tg in items if br]
        if branched:
            rows = torch.tensor([r for r, _, _, _ in branched], device=h1.device)
            b_ids, _ = _padded([br for _, _, br, _ in branched])
            b_pos = lens[rows.cpu()][:, None] + torch.arange(b_ids.shape[1])[None]
            valid = (torch.arange(ids.shape[1])[None] < lens[rows.cpu()][:, None]).to(h1.device)
            past = [(k[rows], v[rows]) for k, v in kv]
            h2, _ = _layers(model, b_ids.to(device), b_pos.to(device), past=past, past_valid=valid)
            sel_r, sel_c = [], []
            for q, (_, key, br, tg) in enumerate(branched):
                sel_r += [q] * len(br)
                sel_c += range(len(br))
                owner += [(key, c + 1) for c in range(len(br))]
                targets += tg[1:]
            feats.append(h2[torch.tensor(sel_r, device=h2.device), torch.tensor(sel_c, device=h2.device)])
        logits = head(torch.cat(feats)).float()
        tgt = torch.tensor(targets, device=logits.device)
        hit = (logits.argmax(-1) == tgt).cpu().tolist()
        tok_lp = F.log_softmax(logits, dim=-1).gather(1, tgt[:, None])[:, 0].double().cpu().tolist()
        acc: dict = {}
        for (key, _), lp, ok in zip(owner, tok_lp, hit):
            s_, g = acc.get(key, (0.0, True))
            acc[key] = (s_ + lp, g and ok)
        done = 0
        for key, res in acc.items():
            for i in unique[key]:
                results[i] = res
            done += len(unique[key])
        if progress:
            progress(done)
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
