"""Sweep kind `moe`: experts x granularity x active size x tokens expand into dense and MoE runs with
the right shapes, impossible pairs are skipped and listed, bad specs exit 2 naming the key, and the
shipped tiny preset plans (no training here: fast)."""

from __future__ import annotations

import copy

import pytest

from launch.sweep.expand import expand, plan, vocab_for
from launch.sweep.spec import parse_spec
from models.accounting import model_counts
from tests.helpers import REPO as ROOT
from tests.helpers import write_base


@pytest.fixture()
def base(work):
    return write_base(work / "base", work / "data")


def spec_of(base, moe: dict, **kw):
    return parse_spec(copy.deepcopy({"name": "m", "base": str(base), "kind": "moe", "moe": moe, **kw}))


def test_expansion_grid_shapes_and_names(base):
    p = expand(
        spec_of(
            base,
            {
                "models": ["n50k", "n100k"],
                "expansion": [4],
                "granularity": [1, 2, 4],
                "tokens": [4096, 8192],
                "min_steps": 1,
                "settings": {"router": "aux_free_bias"},
            },
        )
    )
    assert len(p.runs) == 2 * 4 * 2 and not p.skipped
    assert [r.name for r in p.runs[:4]] == [
        "n50k-dense-d4.1k",
        "n50k-dense-d8.19k",
        "n50k-e4-g1-k1-d4.1k",
        "n50k-e4-g1-k1-d8.19k",
    ]
    active = {}
    for r in p.runs:
        ax, moe = r.axes, r.cfg.model.moe
        assert (
            set(ax) == {"model", "experts", "granularity", "top_k", "tokens", "dense"}
            and r.cfg.train.tokens == ax["tokens"]
        )
        if ax["dense"]:
            assert moe is None and ax["experts"] == ax["granularity"] == 1
        else:  # expansion 4: E = 4 G experts of d_ff / G, top-G (the active FFN of one dense FFN)
            g = ax["granularity"]
            assert (
                moe.num_experts == 4 * g
                and moe.top_k == g
                and moe.d_ff * g == r.cfg.model.ffn_dim
                and moe.router == "aux_free_bias"
            )
        n = model_counts(r.cfg.model, vocab_for(r.cfg)).active_non_embedding
        active.setdefault((ax["model"], ax["dense"]), set()).add(n)
    # every granularity of a model keeps its active parameters up to the router (d_model x E per layer)
    for (model, dense), ns in active.items():
        assert dense or max(ns) - min(ns) <= 2 * 64 * 16, (model, ns)
    assert len({r.id for r in p.runs}) == len(p.runs)


def test_experts_literal_tokens_per_param_and_skips(base):
    p = expand(
        spec_of(
            base,
            {
                "models": ["n50k"],
                "experts": [4],
                "granularity": [1, 2, 4, 5],
                "top_k": 2,
                "tokens_per_param": [0.05],
                "dense": False,
                "min_steps": 1,
            },
        )
    )
    assert [r.name.rsplit("-d", 1)[0] for r in p.runs] == ["n50k-e4-g1-k2", "n50k-e4-g2-k4"]
    assert any("does not divide by granularity 5" in s for s in p.skipped)
    assert any("top_k x G = 8 experts per token but only 4 experts" in s for s in p.skipped)
    for r in p.runs:
        assert r.cfg.train.tokens == round(0.05 * model_counts(r.cfg.model, vocab_for(r.cfg)).active_non_embedding)


def test_shipped_moe_law_tiny_plans():
    p = plan(ROOT / "configs" / "sweeps" / "moe-law-tiny.yaml")
    assert len(p.runs) == 24 and not p.skipped
    assert {(r.axes["experts"], r.axes["granularity"]) for r in p.runs} == {(1, 1), (4, 1), (8, 2), (16, 4)}
    assert len({r.axes["model"] for r in p.runs}) == 3 and len({r.axes["tokens"] for r in p.runs}) == 2
    assert all(r.cfg.model.moe is None or r.cfg.model.moe.capacity_factor is None for r in p.runs)
    assert sum(r.est_s for r in p.runs) < 20 * 60  # CPU minutes on 2 workers
