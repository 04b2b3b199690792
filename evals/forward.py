"""The parts of `models.gpt.GPT`'s forward that scoring and decoding need, without the LM head
(apply `GPT.head`, which carries mup's logit multiplier, to the hidden states).

Scoring reads log-probs at a few positions only, so it runs the backbone and applies the LM head
to those rows alone; and a multiple-choice question runs its context once, its choices then
attending to the context's cached keys/values. Both functions mirror the model's own forward;
`tests/test_eval_requests.py` checks them against the model's logits, so a change to the model
cannot go unnoticed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


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
        x, _ = layer(x, cos, sin, kv_caches[i] if kv_caches else None, input_ids)
    return model.model.norm(x)


def backbone(
    model,
    ids: torch.Tensor,
    pos: torch.Tensor | None = None,
    past=None,
    past_rows=None,
    past_valid=None,
    keep_kv: bool = False,
):
    """Final-norm hidden states over `ids`, optionally attending to the keys/values of an earlier pass.

    `pos`: (B, T) positions (None: 0..T-1 in every row). `past`: per layer (k, v) of shape
    (B0, n_kv, W, hd) as returned with `keep_kv=True`; `past_rows`: (B,) the row of `past` that
    each row continues; `past_valid`: (B, P) which of that row's first P positions are real.
    Without `past` this is the model's causal forward. Mirrors Block/Attention.forward (tests
    compare against the model's own logits). `past` is gathered one layer at a time, so its
    copy for this batch never holds more than one layer.
    """
    from models.layers import apply_rope  # deferred: imports torch

    emb = model.model.embed_tokens
    b, t = ids.shape
    cos, sin = model._rope(0, t if pos is None else int(pos.max()) + 1, ids.device)
    cos, sin = cos.to(emb.weight.dtype), sin.to(emb.weight.dtype)
    if pos is not None:
        cos, sin = cos[pos][:, None], sin[pos][:, None]
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
            p_len = past_valid.shape[1]
            k = torch.cat([past[i][0][past_rows, :, :p_len], k], dim=2)
            v = torch.cat([past[i][1][past_rows, :, :p_len], v], dim=2)
        if a.n_kv != a.n_heads:
            k = k.repeat_interleave(a.n_heads // a.n_kv, dim=1)
            v = v.repeat_interleave(a.n_heads // a.n_kv, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, scale=a.scale)
        x = x + a.o_proj(y.transpose(1, 2).reshape(b, t, -1))
        h = layer.post_attention_layernorm(x)
        m = layer.mlp(h, ids) if getattr(layer, "routes_by_token", False) else layer.mlp(h)
        x = x + (m[0] if isinstance(m, tuple) else m)
    return model.model.norm(x), kv
