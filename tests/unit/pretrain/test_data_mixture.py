"""Mixtures and multi-shard reading without the trainer: quotas, the interleaving pattern as a
pure function of the sample index, closed-form per-component counts, resolution of components
and the shared-tokenizer check; windows and held-out rows over many shards equal one shard."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pretrain.data.config import DataConfig
from pretrain.data.mixture import open_mixture
from pretrain.data.prepare import prepare
from pretrain.data.tokens import TokenStream
from pretrain.errors import DataError
from pretrain.evaluation import EvalPart, HeldOutEval
from pretrain.feed.sampler import MixtureSampler, WindowSampler, mixture_quotas
from pretrain.feed.train_feed import TrainFeed

QUIET = {"log": lambda m: None}


@pytest.mark.parametrize(
    "weights, period, expected",
    [
        ([0.7, 0.3], 10, [7, 3]),
        ([2, 1, 1], 1000, [500, 250, 250]),
        ([0.999, 0.001], 100, [99, 1]),  # every component gets a slot
        ([1, 1, 1], 10, [4, 3, 3]),
        ([1e-6, 1e-6, 1.0], 3, [1, 1, 1]),
    ],
)
def test_quotas(weights, period, expected):
    q = mixture_quotas(weights, period)
    assert q == expected and sum(q) == period


def streams(sizes=(5000, 3000, 800)):
    return [np.arange(n, dtype=np.uint16) + 10_000 * (c + 1) for c, n in enumerate(sizes)]


def test_mixture_proportions_and_closed_form_counts():
    mix = MixtureSampler(streams(), [0.5, 0.3, 0.2], seq_len=8, seed=3, period=100)
    n = 1234
    located = [mix.locate(i) for i in range(n)]
    comps = np.array([c for c, _ in located])
    assert np.bincount(comps, minlength=3).tolist() == mix.counts(n).tolist()
    assert mix.counts(1000).tolist() == [500, 300, 200]  # exact at every multiple of the period
    for c in range(3):  # each component's own draws are 0, 1, 2, ... in order: no sample skipped or repeated
        assert [k for cc, k in located if cc == c] == list(range(int((comps == c).sum())))
    # the rows come from the component's tokens: the id range tells which
    x, _ = mix.batch(0, 64)
    assert [int(r[0]) // 10_000 - 1 for r in x] == [c for c, _ in located[:64]]


def test_mixture_is_a_pure_function_of_the_sample_index():
    a = MixtureSampler(streams(), [0.6, 0.3, 0.1], 8, seed=1, period=50)
    b = MixtureSampler(streams(), [0.6, 0.3, 0.1], 8, seed=1, period=50)
    b.batch(0, 700)  # another history, crossing epochs of the small component
    xa, ya = a.batch(613, 16)
    xb, yb = b.batch(613, 16)
    assert (xa == xb).all() and (ya == yb).all()
    c = MixtureSampler(streams(), [0.6, 0.3, 0.1], 8, seed=2, period=50)
    assert not (c.batch(613, 16)[0] == xa).all()


def test_windows_over_many_shards_equal_one_shard():
    rng = np.random.default_rng(0)
    full = rng.integers(0, 500, 20_000).astype(np.uint16)
    cuts = np.sort(rng.choice(np.arange(1, len(full)), 40, replace=False))
    many = TokenStream(np.split(full, cuts))
    one, sharded = WindowSampler(full, 64, seed=5), WindowSampler(many, 64, seed=5)
    for first in (0, 37, 300, 311 * 3):  # the last crosses into the second epoch
        for x, y in zip(one.batch(first, 8), sharded.batch(first, 8)):
            assert (x == y).all()
    ev1 = HeldOutEval(full, 64, 4096, 3.0, 4)
    ev2 = HeldOutEval([EvalPart(None, many, 3.0)], 64, 4096, None, 4)
    assert (ev1.starts == ev2.starts).all()


def corpus(root: Path, tag: str, n: int = 40) -> str:
    (root / f"{tag}.txt").write_text(
        "\n\n".join(f"{tag} paragraph {i}: words about {tag} and more {i * 3}." for i in range(n))
    )
    return f"{tag}.txt"


def data_cfg(tmp_path: Path, name: str, **kw) -> DataConfig:
    base = {
        "name": name,
        "root": str(tmp_path),
        "out_dir": str(tmp_path / name),
        "doc_chars": 200,
        "tokenizer": {"vocab_size": 300},
        "val_fraction": 0.2,
    }
    return DataConfig.model_validate({**base, **kw})


def test_mixture_components_must_share_a_tokenizer(tmp_path):
    a = prepare(data_cfg(tmp_path, "a", sources=[corpus(tmp_path, "alpha")]), **QUIET)
    shared = {"kind": "hf", "path": str(a.tokenizer_path)}
    prepare(data_cfg(tmp_path, "b", sources=[corpus(tmp_path, "beta")], tokenizer=shared), **QUIET)
    prepare(data_cfg(tmp_path, "c", sources=[corpus(tmp_path, "gamma")]), **QUIET)
    good = DataConfig.model_validate(
        {
            "name": "mix",
            "mixture": {
                "a": {"weight": 3, "data": str(tmp_path / "a")},
                "b": {"weight": 1, "data": str(tmp_path / "b")},
            },
        }
    )
    mix = open_mixture(good, prepare_missing=False)
    assert [c.weight for c in mix.components] == [0.75, 0.25] and mix.vocab_size == a.vocab_size
    assert (
        mix.meta["mixture"]["b"]["fingerprint"] == json.loads((tmp_path / "b" / "meta.json").read_text())["fingerprint"]
    )
    feed = TrainFeed(mix, seq_len=16, seed=0)
    assert feed.unique_tokens == sum(c.data.unique_tokens("train") for c in mix.components)
    assert set(feed.source_tokens(100)) == {"tokens/a", "tokens/b"}
    bad = DataConfig.model_validate(
        {
            "name": "mix",
            "mixture": {
                "a": {"weight": 1, "data": str(tmp_path / "a")},
                "c": {"weight": 1, "data": str(tmp_path / "c")},
            },
        }
    )
    with pytest.raises(
        DataError, match=r"do not share one tokenizer.*a=[0-9a-f]{12}.*c=[0-9a-f]{12}.*kind: hf, path: "
    ):
        open_mixture(bad, prepare_missing=False)


def test_mixture_config_errors():
    with pytest.raises(ValueError, match="data.mixture replaces data.sources"):
        DataConfig.model_validate({"sources": ["x.txt"], "mixture": {"a": 1}})
    with pytest.raises(ValueError, match="labels must be plain names"):
        DataConfig.model_validate({"mixture": {"data/a": 1}})
    with pytest.raises(ValueError, match="greater than 0"):
        DataConfig.model_validate({"mixture": {"a": 0}})
    cfg = DataConfig.model_validate({"name": "m", "mixture": {"no_such_preset": 1}})
    with pytest.raises(
        DataError, match=r"'no_such_preset' is neither a data preset \(allowed: .*default.*gutenberg100"
    ):
        open_mixture(cfg, prepare_missing=False)
    with pytest.raises(DataError, match="is a mixture of prepared data sets"):
        prepare(DataConfig.model_validate({"name": "m", "mixture": {"default": 1}}), **QUIET)
