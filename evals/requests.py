"""Token-level scoring and decoding for the lm-eval adapter, independent of lm-eval itself.

Why not just call `model(ids).logits` per request, as lm-eval's `hf` model does: the output
projection over the vocabulary dominates the cost of small models, a loglikelihood request needs
it only at its continuation positions, and the choices of a question repeat its context. So
identical requests are scored once, a shared context runs once (its choices attend to its cached
keys/values), rows are batched by length with little padding, and the LM head runs on the target
positions only. Truncation follows lm-eval's `hf` model exactly (keep the last `max_length + 1`
tokens, drop the last), so results agree with `lm_eval --model hf` on the exported checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from evals.forward import backbone, hidden_states
from evals.request_batching import Pair, batches, prefix_groups


def _padded(seqs: Sequence[Sequence[int]], device) -> torch.Tensor:
    ids = np.zeros((len(seqs), max(len(x) for x in seqs)), dtype=np.int64)
    for r, x in enumerate(seqs):
        ids[r, : len(x)] = x
    return torch.from_numpy(ids).to(device)


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

    Identical pairs are scored once, and inputs that start alike run their common prefix once
    (`prefix_groups`). Pass 1 runs the prefixes, longest first (the first batch fails fast if memory
    is short), keeping their keys/values where branches follow; pass 2 runs the branches of that
    batch against them, sorted by length. `batch_size` bounds the rows of a pass-1 batch,
    `max_batch_tokens` the tokens of either pass (pass 2 counts the keys/values it attends to);
    batches hold at most 10% padding. The LM head runs on the target positions only.
    """
    which, n_distinct, groups = prefix_groups(pairs, max_length)
    total = np.zeros(n_distinct)
    greedy = np.ones(n_distinct, dtype=bool)
    per_key = np.bincount(which, minlength=n_distinct)
    prefixes = sorted(groups, key=lambda p: (-len(p), p))
    for batch in batches(range(len(prefixes)), [len(p) for p in prefixes], batch_size, max_batch_tokens):
        pre = [prefixes[j] for j in batch]
        # (row, pair, branch, its targets predicted in the branch) of the members with a branch
        branched = [
            (r, k, br, tg[max(0, len(tg) - len(br)) :]) for r, p in enumerate(pre) for k, br, tg in groups[p] if br
        ]
        h1, kv = backbone(model, _padded(pre, device), keep_kv=bool(branched))
        rows, owner, target = [], [], []  # the targets predicted inside the prefixes
        for r, p in enumerate(pre):
            for k, br, tg in groups[p]:
                n1 = max(0, len(tg) - len(br))
                rows += range(r * h1.shape[1] + len(p) - n1, r * h1.shape[1] + len(p))
                owner += [k] * n1
                target += tg[:n1]
        feats = [_rows(h1, rows)]
        for h2, items in _branches(model, pre, branched, kv, batch_size, max_batch_tokens, device):
            feats.append(
                _rows(
                    h2,
                    [
                        q * h2.shape[1] + c
                        for q, (_, _, br, tg) in enumerate(items)
                        for c in range(len(br) - len(tg), len(br))
                    ],
                )
            )
            for _, k, _, tg in items:
                owner += [k] * len(tg)
                target += tg
        lp, hit = _target_logprobs(model, torch.cat(feats), torch.tensor(target, device=h1.device))
        owner_a = np.asarray(owner)
        np.add.at(total, owner_a, lp)
        greedy[owner_a[~hit]] = False
        if progress:
            progress(int(per_key[np.unique(owner_a)].sum()))
    return [(float(total[k]), bool(greedy[k])) for k in which]


def _branches(model, pre, branched, kv, batch_size, max_batch_tokens, device):
    """Pass 2: (hidden states, items) per batch of branches, each attending to its prefix's
    keys/values. Branch rows are short, so the token budget rather than the row count bounds them."""
    branched = sorted(branched, key=lambda b: -len(b[2]))
    lens = torch.tensor([len(p) for p in pre])
    for chunk in batches(
        range(len(branched)),
        [len(br) for _, _, br, _ in branched],
        None if max_batch_tokens else batch_size,
        max_batch_tokens,
        past=[len(pre[r]) for r, _, _, _ in branched],
    ):
        items = [branched[i] for i in chunk]
        sel = torch.tensor([r for r, _, _, _ in items])
        p_len = lens[sel]
        ids = _padded([br for _, _, br, _ in items], device)
        pos = (p_len[:, None] + torch.arange(ids.shape[1])[None]).to(device)
        valid = (torch.arange(int(p_len.max()))[None] < p_len[:, None]).to(device)
        h2, _ = backbone(model, ids, pos, past=kv, past_rows=sel.to(device), past_valid=valid)
        yield h2, items


def _rows(h: torch.Tensor, flat: list[int]) -> torch.Tensor:
    """Rows `flat` of h (B, T, D) viewed as (B*T, D)."""
    return h.reshape(-1, h.shape[-1])[torch.tensor(flat, dtype=torch.long, device=h.device)]


def _target_logprobs(model, feats: torch.Tensor, targets: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """log P(target) and whether it is the argmax, per row of `feats`, in chunks of rows whose
    logits stay in the CPU's cache: on a vocabulary of 4,096 this is twice as fast as one
    (rows, vocab) matrix, and gives the same numbers."""
    chunk = max(32, (1 << 20) // model.lm_head.out_features)
    lps, hits = [], []
    for i in range(0, len(feats), chunk):
        logits, tgt = model.head(feats[i : i + chunk]).float(), targets[i : i + chunk, None]
        lps.append(logits.log_softmax(-1).gather(1, tgt)[:, 0])
        hits.append(logits.argmax(-1) == tgt[:, 0])
    return torch.cat(lps).double().cpu().numpy(), torch.cat(hits).cpu().numpy()


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
        window = tokens[max(0, end - max_length - 1) : end - 1]
        out.append((window[: len(window) - (n - 1)], tokens[end - n : end]))
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
    from models.gpt import KVCache  # deferred: imports torch

    if max_new_tokens <= 0:
        return ""
    caches = [KVCache() for _ in model.model.layers]
    ids = torch.tensor([list(context)], dtype=torch.long, device=device)
    out: list[int] = []
    text = ""
    for _ in range(max_new_tokens):
        h = hidden_states(model, ids, caches)[:, -1]
        logits = model.head(h).float()[0]
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
