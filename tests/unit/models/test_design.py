"""Shape rules (models/design.py) and `scalelab model design`: exact counts of published models,
every rule within its stated tolerance from 1e6 to 1e12 parameters, and a designed model that trains."""

from __future__ import annotations

import math

import pytest

from models.accounting import model_counts
from models.config import ModelConfig
from models.design import OLMO_LADDER, RULES, design, llama_ffn

# Published Llama-layout shapes (config.json of each model card / the papers' tables) and the exact
# parameter count transformers reports for them (`model.num_parameters()`, the count on each HF
# model page): Llama 2 (Touvron et al. 2023, Table 1 sizes 7B/13B/70B; 70B uses GQA with 8 kv heads),
# Llama 3 8B (Meta model card: 8,030,261,248) and Mistral 7B v0.1 (Jiang et al. 2023, Table 1:
# dim 4096, 32 layers, 32 heads, 8 kv heads, hidden 14336, vocab 32000). Early HF uploads of
# Llama-2 13B/70B state 2,560 / 5,120 more in their safetensors metadata: the rotary inv_freq
# buffer (64 per layer) saved with them, not a parameter.
PUBLISHED = {
    "llama-2-7b": (dict(d_model=4096, n_layers=32, n_heads=32, d_ff=11008, vocab_size=32000), 6_738_415_616),
    "llama-2-13b": (dict(d_model=5120, n_layers=40, n_heads=40, d_ff=13824, vocab_size=32000), 13_015_864_320),
    "llama-2-70b": (
        dict(d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, d_ff=28672, vocab_size=32000),
        68_976_648_192,
    ),
    "llama-3-8b": (
        dict(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336, vocab_size=128256),
        8_030_261_248,
    ),
    "mistral-7b-v0.1": (
        dict(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336, vocab_size=32000),
        7_241_732_096,
    ),
}


@pytest.mark.parametrize("name", PUBLISHED)
def test_published_shapes_count_exactly(name):
    shape, params = PUBLISHED[name]
    assert model_counts(ModelConfig(**shape)).total == params


def test_llama_ffn_rounding_gives_the_published_widths():
    # Llama's FeedForward: int(2*4d/3) x ffn_dim_multiplier, rounded up to multiple_of
    assert llama_ffn(4096) == 11008 and llama_ffn(5120) == 13824
    assert llama_ffn(8192, 1.3, 4096) == 28672  # Llama-2 70B
    assert llama_ffn(4096, 1.3, 1024) == 14336  # Llama-3 8B (and Mistral 7B's 14336)


def _targets(lo: int, hi: int, per_decade: int = 16):
    return [10 ** (e + i / per_decade) for e in range(lo, hi) for i in range(per_decade)]


# The worst |error| per decade the module docstring (and README) state, with a little slack for
# the last digit; vocab 32000, untied, MHA.
COARSE = {
    ("marin", "non_embedding"): (0.07, 0.02),
    ("marin", "total"): (0.105, 0.063),
    ("olmo-ladder", "non_embedding"): (0.023, 0.02),
    ("olmo-ladder", "total"): (0.097, 0.045),
}


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("kind", ["total", "non_embedding"])
def test_rules_meet_their_tolerance_from_1e6_to_1e12(rule, kind):
    worst = {}
    for t in _targets(6, 12) + [1e12]:
        d = design(t, rule, n_kind=kind)
        c = d.counts
        assert d.rel_error == pytest.approx((c.total if kind == "total" else c.non_embedding) / t - 1)
        assert d.model.d_model % d.model.n_heads == 0 and d.model.head_dim in (2, 4, 8, 16, 32, 64, 128)
        decade = min(int(math.floor(math.log10(t) + 1e-9)), 11)
        worst[decade] = max(worst.get(decade, 0.0), abs(d.rel_error))
    assert all(worst[e] <= 0.02 for e in range(8, 12)), worst  # within 2% from 1e8 up
    below_1e7, below_1e8 = COARSE[(rule, kind)]
    assert worst[6] <= below_1e7 and worst[7] <= below_1e8, worst


def test_gqa_option_keeps_the_tolerance_and_divides_the_heads():
    for t in _targets(8, 12, 4):
        d = design(t, "marin", kv_heads=8)
        assert abs(d.rel_error) <= 0.02
        assert d.model.kv_heads <= 8 and d.model.n_heads % d.model.kv_heads == 0
        if t >= 1e10:  # widths of a multiple of 8 heads are dense enough there
            assert d.model.kv_heads == 8


def test_a_rule_reproduces_its_own_shapes():
    # Marin: d = 2048 -> round(2048 / (64 + 44 - 9)) = 21 layers, 16 heads of 128, SwiGLU 8192
    marin = ModelConfig(d_model=2048, n_layers=21, n_heads=16, d_ff=8192, vocab_size=32000)
    d = design(model_counts(marin).total, "marin")
    assert (d.model.d_model, d.model.n_layers, d.model.n_heads, d.model.ffn_dim) == (2048, 21, 16, 8192)
    assert d.rel_error == 0 and d.notes == []
    # OLMo-2 7B on the ladder: d 4096, 32 layers, 32 heads, FFN llama_like x1.5 -> 16384
    assert (4096, 32) in OLMO_LADDER and llama_ffn(4096, 1.5, 256) == 16384
    olmo7 = ModelConfig(d_model=4096, n_layers=32, n_heads=32, d_ff=16384, vocab_size=100352)
    d = design(model_counts(olmo7).non_embedding, "olmo-ladder", n_kind="non_embedding", vocab_size=100352)
    assert (d.model.d_model, d.model.n_layers, d.model.n_heads, d.model.ffn_dim) == (4096, 32, 32, 16384)


def test_small_models_use_smaller_heads_and_say_when_off():
    d = design(1e6, "marin", vocab_size=512)
    assert d.model.head_dim < 128 and d.model.n_heads >= 4
    far = design(2e6, "marin", vocab_size=32000)  # the embedding alone is 2 x 32000 x d
    assert abs(far.rel_error) > 0.02 and any("coarse" in n for n in far.notes)


def test_design_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown shape rule 'x'; allowed: marin, olmo-ladder"):
        design(1e9, "x")
    with pytest.raises(ValueError, match="n_kind"):
        design(1e9, n_kind="active")
