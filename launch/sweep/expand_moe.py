"""Sweep kind `moe`: dense and MoE runs over experts x granularity x active size x tokens.

For each model (active size) and token count: the dense model (E = 1, G = 1, when `dense`), and
for each expert count (or expansion rate) and granularity G an MoE with expert d_ff = the model's
d_ff / G and top_k x G experts per token, so every granularity keeps the active FFN of top_k dense
FFNs. Tokens are given, or `tokens_per_param` x the run's active non-embedding parameters.
Pairs that cannot be built (d_ff not divisible by G, more experts per token than experts) or
that give fewer than `min_steps` steps are skipped and listed. Each run records its axes
(model, experts, granularity, top_k, tokens) for `scalelab fit moe`.
"""

from __future__ import annotations

import math

from launch.sweep.naming import fmt_num, model_label
from launch.sweep.resolve import vocab_for
from models.accounting import model_counts
from pretrain.errors import ConfigError


def _tokens(ms, n_active: int, base_tokens: int) -> list[float]:
    if ms.tokens:
        return list(ms.tokens)
    if ms.tokens_per_param:
        return [r * n_active for r in ms.tokens_per_param]
    return [float(base_tokens)]


def moe_points(spec, b) -> tuple[list, list[str]]:
    """(name parts, overrides, axes) per run, and the skipped pairs with their reason."""

    ms = spec.moe
    out, skipped = [], []
    for m in ms.models:
        label = model_label(m)
        _, base = b.resolve([("model", m), ("model.moe", None)], label)
        d_ff, vocab = base.model.ffn_dim, vocab_for(base)
        shapes = [(1, 1, 1)] if ms.dense else []
        for g in ms.granularity:
            if d_ff % g:
                skipped.append(f"{label}-g{g}: d_ff {d_ff} of {label} does not divide by granularity {g}")
                continue
            for e in ms.experts if ms.experts is not None else [x * g for x in ms.expansion]:
                e, k = int(round(e)), ms.top_k * g
                if k > e:
                    skipped.append(f"{label}-e{e}-g{g}: top_k x G = {k} experts per token but only {e} experts")
                    continue
                shapes.append((e, g, k))
        for e, g, k in shapes:
            moe = None if e == 1 and g == 1 else {**ms.settings, "num_experts": e, "top_k": k, "d_ff": d_ff // g}
            name = f"{label}-dense" if moe is None else f"{label}-e{e}-g{g}-k{k}"
            _, cfg = b.resolve([("model", m), ("model.moe", moe)], name)
            n_active = model_counts(cfg.model, vocab).active_non_embedding
            for t in _tokens(ms, n_active, cfg.train.tokens or cfg.total_steps() * cfg.tokens_per_step()):
                steps = math.ceil(t / cfg.tokens_per_step())
                run = f"{name}-d{fmt_num(int(round(t)))}"
                if steps < ms.min_steps:
                    skipped.append(f"{run}: {steps} steps < moe.min_steps={ms.min_steps}")
                    continue
                items = [("model", m), ("model.moe", moe), ("train.steps", None), ("train.tokens", int(round(t)))]
                axes = {
                    "model": label,
                    "experts": e,
                    "granularity": g,
                    "top_k": k,
                    "tokens": int(round(t)),
                    "dense": moe is None,
                }
                out.append(([run], items, axes))
    if not out:
        raise ConfigError("sweep spec: kind moe expands to no runs: " + "; ".join(skipped[:5]))
    return out, skipped
