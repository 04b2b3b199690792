"""Shape rules: a parameter target -> a Llama-layout `ModelConfig` (torch-free).

A rule says how deep a model of width d is, how wide its heads and its SwiGLU FFN are. `design`
searches the width, and the depth and FFN width a little around the rule, for the shape whose
exact count (`models.accounting.model_counts`) is closest to the target while staying as close to the
rule as the 2% tolerance allows. Rules (`RULES`):

- `marin` (default): Marin's 2025 scaling recipe (marin-community/marin,
  lib/marin/src/marin/scaling_laws/recipe.py, `MARIN_2025_RECIPE`): n_layers = round(d / (64 +
  4·log2(d) − 9)), head_dim 128 (n_heads = d/128, kv heads = heads), and an FFN of `intermediate_dim
  = 4·d` *in a SwiGLU MLP* (Qwen3 layout: gate, up, down), i.e. 12·d² FFN parameters per layer, 1.5x
  Llama's 8/3 ratio. Marin validated it with IsoFLOP sweeps over widths 512–4096 (steps of 128,
  256 above 9e18 FLOPs); outside that range the formula is extrapolated.
- `olmo-ladder`: the aspect ratios of the OLMo-2 model ladder (OLMo-core
  `TransformerConfig.olmo2_*`; Bhagia et al. 2024, arXiv:2412.04403): (d, n_layers) = (384, 8),
  (512, 12), (768, 12), (1024, 16), (1280, 16), (1536, 16), (2048, 16), (3328, 16), (4096, 32),
  (5120, 40); depth interpolated linearly in log d between them, d/48 below and d/128 above.
  head_dim 64 below d = 2048, 128 from there (the ladder's 600M/760M/3B heads of 80/96/208 are
  rounded to these). FFN: OLMo's `llama_like` rounding with hidden_size_multiplier 1.5,
  multiple_of 256 (about 4·d). Validated by OLMo on 190M–1.3B ladders predicting 7B and 13B.

Llama's FFN rounding (`llama_ffn`: int(2·4d/3), times ffn_dim_multiplier, rounded up to
multiple_of) is what `olmo-ladder` uses and what Llama-2 70B (1.3, 4096) and Llama-3 8B (1.3,
1024) were built with. GQA is an option: `kv_heads=K` gives min(n_heads, K) key/value heads
(Llama-2 70B, Llama-3, Mistral: 8); the search prefers widths whose head count K divides and
otherwise takes the largest divisor of n_heads below K.

The search. Widths are multiples of the head_dim; depth may move up to 2 layers off the rule and
the FFN width up to 10% off it (Llama's `ffn_dim_multiplier` is the same knob), in steps of 256
(d_ff >= 16384), 128 (>= 4096) or 32. Among the shapes within 2% of the target it takes the one
nearest the rule: kv heads nearest K (with `kv_heads`), then fewest layers off, then
least FFN change, then smallest error; when none is within 2%, the smallest error.

Small models: head_dim is the rule's, capped at the largest power of two <= d/4, so a model keeps
at least 4 heads (d=256 has heads of 64, d=128 of 32); widths below 512 are outside both rules'
validated range (Marin's sweeps start at 512, OLMo's ladder at 384).

How close it gets: the worst |error| over 16 log-spaced targets per decade (vocab 32000, untied,
MHA; tests/test_model_design.py pins these bounds). From 1e8 up both rules stay within 2% for
total and non-embedding targets; below, the grid is coarse (a few layers of a few heads, and at
1e6 total parameters a 32000-token vocabulary alone is 2·32000·d):

    decade        marin non_emb  marin total  olmo-ladder non_emb  olmo-ladder total
    1e6 - 1e7     6.9%           10.3%        2.2%                 9.5%
    1e7 - 1e8     1.9%           6.2%         1.9%                 4.3%
    1e8 - 1e12    <= 1.95%       <= 1.82%     <= 1.98%             <= 1.94%
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from models.accounting import ModelCounts, model_counts
from models.config import ModelConfig

TOLERANCE = 0.02  # relative error the search aims for (from 1e8 parameters up it always gets it)
DEPTH_SPREAD = 2  # layers the search may move off the rule's depth
FFN_SPREAD = 0.10  # relative change of the rule's FFN width the search may make
N_KINDS = ("total", "non_embedding")
MAX_WIDTH = 1 << 18


def llama_ffn(d_model: int, multiplier: float | None = None, multiple_of: int = 256) -> int:
    """Llama's SwiGLU width: int(2·4d/3), times ffn_dim_multiplier, rounded up to multiple_of
    (meta-llama/llama model.py FeedForward; OLMo-core's llama_like writes int(8d/3), the same)."""
    hidden = int(2 * 4 * d_model / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def small_head_dim(d_model: int, head_dim: int) -> int:
    """The rule's head_dim, capped at the largest power of two <= d/4 (at least 4 heads)."""
    q = head_dim
    while q > 2 and 4 * q > d_model:
        q //= 2
    return q


def ffn_step(d_ff: int) -> int:
    """Granularity of the FFN width the search may pick (multiple_of)."""
    return 256 if d_ff >= 16384 else 128 if d_ff >= 4096 else 32


@dataclass(frozen=True)
class ShapeRule:
    name: str
    source: str
    depth: Callable[[int], int]  # the rule's n_layers at width d
    head_dim: Callable[[int], int]  # head dimension at width d
    d_ff: Callable[[int], int]  # FFN (SwiGLU hidden) width at width d
    depth_spread: int = DEPTH_SPREAD  # layers the search may move off the rule's depth


def _marin_depth(d: int) -> int:
    return max(1, round(d / (64 + 4 * math.log2(d) - 9)))


OLMO_LADDER = (
    (384, 8),
    (512, 12),
    (768, 12),
    (1024, 16),
    (1280, 16),
    (1536, 16),
    (2048, 16),
    (3328, 16),
    (4096, 32),
    (5120, 40),
)


def _olmo_depth(d: int) -> int:
    pts = OLMO_LADDER
    if d <= pts[0][0]:
        return max(1, round(d / 48))
    if d >= pts[-1][0]:
        return max(1, round(d / 128))
    for (d0, l0), (d1, l1) in zip(pts, pts[1:]):
        if d0 <= d <= d1:
            t = math.log(d / d0) / math.log(d1 / d0)
            return max(1, round(l0 + t * (l1 - l0)))
    raise AssertionError(d)


RULES: dict[str, ShapeRule] = {
    "marin": ShapeRule(
        "marin",
        "Marin 2025 recipe (marin-community/marin scaling_laws/recipe.py): "
        "n_layers = round(d / (64 + 4 log2 d - 9)), head_dim 128, SwiGLU intermediate 4d",
        _marin_depth,
        lambda d: small_head_dim(d, 128),
        lambda d: 4 * d,
    ),
    "olmo-ladder": ShapeRule(
        "olmo-ladder",
        "OLMo-2 ladder aspect ratios (OLMo-core TransformerConfig.olmo2_*, arXiv:2412.04403): "
        "depth interpolated over (384,8)...(5120,40), head_dim 64/128, FFN llama_like x1.5 multiple_of 256",
        _olmo_depth,
        lambda d: small_head_dim(d, 64 if d < 2048 else 128),
        lambda d: llama_ffn(d, 1.5, 256),
    ),
}
DEFAULT_RULE = "marin"


@dataclass(frozen=True)
class Design:
    """A designed model: its config, the rule, the target and how close its count came."""

    model: ModelConfig
    rule: str
    target: float
    n_kind: str
    counts: ModelCounts
    rel_error: float  # (count of n_kind) / target - 1
    rule_depth: int  # the rule's depth at this width (the search may move off it)
    rule_d_ff: int  # the rule's FFN width at this width
    notes: list[str] = field(default_factory=list)

    def model_dict(self) -> dict:
        """The `model:` mapping (the keys of configs/models/*.yaml) that builds this shape."""
        m = self.model
        out = {
            "d_model": m.d_model,
            "n_layers": m.n_layers,
            "n_heads": m.n_heads,
            "n_kv_heads": m.kv_heads,
            "d_ff": m.ffn_dim,
            "vocab_size": m.vocab_size,
            "seq_len": m.seq_len,
            "tie_embeddings": m.tie_embeddings,
            "moe": None,
        }
        return out

    def to_dict(self) -> dict:
        c = self.counts
        return {
            "model": self.model_dict(),
            "shape_rule": self.rule,
            "target": self.target,
            "n_kind": self.n_kind,
            "rel_error": self.rel_error,
            "rule_depth": self.rule_depth,
            "rule_d_ff": self.rule_d_ff,
            "params": c.total,
            "non_embedding_params": c.non_embedding,
            "active_params": c.active,
            "flops_per_token": c.flops_per_token,
            "notes": list(self.notes),
        }


def _median(values) -> float:
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def family_rule(shapes: list[dict], name: str = "runs") -> ShapeRule:
    """The family a study's runs came from, as a rule (a plan designs its run in it).

    shapes: the runs' `model:` mappings (d_model, n_layers, n_heads, d_ff). Depth: the runs' own
    when they share one (a two-layer ladder plans a two-layer model), else interpolated in log d
    between the runs' (width, median depth) points like the OLMo ladder, with the end points'
    aspect ratio d / n_layers beyond them; the search keeps that depth. Head dim: that of the run
    nearest in log width. FFN:
    the runs' median d_ff / d (rounded to 32), or the trainer's default 8d/3 when they left it."""
    if not shapes:
        raise ValueError("family_rule needs at least one model shape")
    by_width: dict[int, list[int]] = {}
    heads: dict[int, int] = {}
    for s in shapes:
        d = int(s["d_model"])
        by_width.setdefault(d, []).append(int(s["n_layers"]))
        heads[d] = d // int(s["n_heads"])
    pts = tuple((d, max(1, round(_median(ls)))) for d, ls in sorted(by_width.items()))
    depths = {L for _, L in pts}
    ratios = [s["d_ff"] / s["d_model"] for s in shapes if s.get("d_ff")]
    ffn_ratio = _median(ratios) if len(ratios) == len(shapes) else None

    def depth(d: int) -> int:
        if len(depths) == 1:
            return pts[0][1]
        if d <= pts[0][0]:
            return max(1, round(d * pts[0][1] / pts[0][0]))
        if d >= pts[-1][0]:
            return max(1, round(d * pts[-1][1] / pts[-1][0]))
        for (d0, l0), (d1, l1) in zip(pts, pts[1:]):
            if d0 <= d <= d1:
                t = math.log(d / d0) / math.log(d1 / d0)
                return max(1, round(l0 + t * (l1 - l0)))
        raise AssertionError(d)

    def head_dim(d: int) -> int:
        near = min(heads, key=lambda w: abs(math.log(w / d)))
        return min(heads[near], d)

    def d_ff(d: int) -> int:
        if ffn_ratio is None:
            return ((8 * d // 3 + 31) // 32) * 32  # models.config.ModelConfig.ffn_dim's default
        return max(32, round(ffn_ratio * d / 32) * 32)

    ffn = "8d/3 (the trainer's default)" if ffn_ratio is None else f"{ffn_ratio:.3g}d"
    depth_text = (
        f"n_layers {pts[0][1]} at every width"
        if len(depths) == 1
        else "depth interpolated over " + ", ".join(f"({d},{L})" for d, L in pts)
    )
    source = (
        f"the fitted runs' family ({len(shapes)} runs, widths {pts[0][0]}-{pts[-1][0]}): {depth_text}, "
        f"head_dim of the nearest run, FFN {ffn}"
    )
    # the family's depth is kept (depth_spread 0): the target is met by width and FFN only, so a
    # small target's shape is coarse but still one the law was fitted on
    return ShapeRule(name, source, depth, head_dim, d_ff, depth_spread=0)


def _rule(rule: str | ShapeRule) -> ShapeRule:
    if isinstance(rule, ShapeRule):
        return rule
    if rule not in RULES:
        raise ValueError(f"unknown shape rule {rule!r}; allowed: {', '.join(RULES)}")
    return RULES[rule]


@lru_cache(maxsize=8)
def _widths(rule: ShapeRule) -> tuple[int, ...]:
    """Every width the rule allows: multiples of its head_dim at that width."""
    hd = rule.head_dim
    return tuple(d for d in range(8, MAX_WIDTH + 1, 2) if d % hd(d) == 0 and (d // hd(d)) >= 1)


def kv_heads_for(n_heads: int, cap: int | None) -> int:
    """GQA: min(n_heads, cap) key/value heads where that divides n_heads, else the largest divisor
    of n_heads below cap; no cap: as many as query heads."""
    if cap is None or cap >= n_heads:
        return n_heads
    return max(k for k in range(1, cap + 1) if n_heads % k == 0)


def _shape(
    d: int, layers: int, d_ff: int, hd: int, kv_cap: int | None, vocab: int, seq_len: int, tie: bool
) -> ModelConfig:
    heads = d // hd
    # unvalidated (fast) while searching; the chosen one is validated in `design`
    return ModelConfig.model_construct(
        d_model=d,
        n_layers=layers,
        n_heads=heads,
        n_kv_heads=kv_heads_for(heads, kv_cap),
        d_ff=d_ff,
        vocab_size=vocab,
        seq_len=seq_len,
        tie_embeddings=tie,
        moe=None,
    )


def _n(cfg: ModelConfig, kind: str) -> int:
    c = model_counts(cfg)
    return c.total if kind == "total" else c.non_embedding


def design(
    params: float,
    rule: str | ShapeRule = DEFAULT_RULE,
    *,
    n_kind: str = "total",
    vocab_size: int = 32000,
    seq_len: int = 2048,
    kv_heads: int | None = None,
    tie_embeddings: bool = False,
) -> Design:
    """The shape of `rule` (a name in RULES, or a `family_rule`) whose `n_kind` count is nearest
    `params` (see the module docstring)."""
    r = _rule(rule)
    if n_kind not in N_KINDS:
        raise ValueError(f"n_kind must be one of {', '.join(N_KINDS)} (got {n_kind!r})")
    if not params > 0 or not vocab_size > 0 or not seq_len > 0:
        raise ValueError("params, vocab_size and seq_len must be > 0")
    if kv_heads is not None and kv_heads < 1:
        raise ValueError(f"kv_heads must be >= 1 (got {kv_heads})")
    best_key, best = None, None
    for d in _widths(r):
        hd, rule_depth, rule_ff = r.head_dim(d), r.depth(d), r.d_ff(d)
        odd_kv = 0 if kv_heads is None else min(d // hd, kv_heads) - kv_heads_for(d // hd, kv_heads)

        def shape(layers: int, d_ff: int, d=d, hd=hd) -> ModelConfig:
            return _shape(d, layers, d_ff, hd, kv_heads, vocab_size, seq_len, tie_embeddings)

        n_rule = _n(shape(rule_depth, rule_ff), n_kind)
        if n_rule < params / 4:
            continue
        if n_rule > params * 4:
            break
        step = ffn_step(rule_ff)
        lo = max(step, math.ceil(rule_ff * (1 - FFN_SPREAD) / step) * step)
        hi = max(lo, math.floor(rule_ff * (1 + FFN_SPREAD) / step) * step)
        for layers in range(max(1, rule_depth - r.depth_spread), rule_depth + r.depth_spread + 1):
            # the count is linear in d_ff at fixed (d, layers): solve for the FFN width that hits the target
            a, b = _n(shape(layers, lo), n_kind), _n(shape(layers, lo + step), n_kind)
            exact = lo + (params - a) / (b - a) * step
            options = {rule_ff} | {
                min(max(f, lo), hi) for f in (math.floor(exact / step) * step, math.ceil(exact / step) * step)
            }
            for d_ff in sorted(options):
                cfg = shape(layers, d_ff)
                err = _n(cfg, n_kind) / params - 1
                within = abs(err) <= TOLERANCE
                key = (
                    (0, odd_kv, abs(layers - rule_depth), abs(math.log(d_ff / rule_ff)), abs(err))
                    if within
                    else (1, abs(err), odd_kv, abs(layers - rule_depth), 0.0)
                )
                if best_key is None or key < best_key:
                    best_key, best = key, (cfg, err, rule_depth, rule_ff)
    if best is None:
        raise ValueError(f"no {r.name} shape near {params:.3g} parameters (vocab {vocab_size})")
    cfg, err, rule_depth, rule_ff = best
    model = ModelConfig(
        **{
            k: getattr(cfg, k)
            for k in ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "seq_len", "tie_embeddings")
        }
    )
    notes = []
    if abs(err) > TOLERANCE:
        notes.append(f"the nearest {r.name} shape is {err:+.1%} off the target: the shape grid is coarse at this size")
    if model.n_layers != rule_depth:
        notes.append(
            f"{model.n_layers} layers instead of the rule's {rule_depth} at d_model {model.d_model}, to meet the target"
        )
    if model.ffn_dim != rule_ff:
        notes.append(
            f"d_ff {model.ffn_dim} instead of the rule's {rule_ff} ({model.ffn_dim / rule_ff - 1:+.1%}), "
            "to meet the target"
        )
    return Design(model, r.name, float(params), n_kind, model_counts(model), err, rule_depth, rule_ff, notes)
