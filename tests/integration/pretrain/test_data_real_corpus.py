"""`prepare` on the bundled corpus (TinyShakespeare + Gutenberg), built once per session with a
small BPE (vocab 512) to keep it to a few seconds."""

from __future__ import annotations

import os
import shutil
import time

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from base.config_files import PROJECT_ROOT
from pretrain.data.load import load_data_config
from pretrain.data.prepare import PreparedData, load_prepared, prepare
from pretrain.data.sources import data_root, iter_documents, resolve_sources
from pretrain.data.split import SplitPlan, doc_hash
from pretrain.errors import DataError

CORPUS = PROJECT_ROOT.parent / "shared" / "data" / "corpus"
pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"bundled corpus not found at {CORPUS} (../shared/data absent)"
)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared") / "default"
    cfg = load_data_config(
        PROJECT_ROOT / "configs/data/default.yaml", [f"out_dir={out}", "tokenizer.vocab_size=512", "root=null"]
    )
    logs: list[str] = []
    start = time.perf_counter()
    data = prepare(cfg, log=logs.append)
    return cfg, data, logs, time.perf_counter() - start


@pytest.fixture(scope="module")
def decoded(real) -> dict[str, list[str]]:
    return {split: _docs(real[1], split) for split in ("train", "val")}


def _docs(data: PreparedData, split: str) -> list[str]:
    tok = data.load_tokenizer()
    arr = np.asarray(data.split_tokens(split))
    starts = np.flatnonzero(arr == data.eot_id)
    bounds = list(starts) + [len(arr)]
    return tok.decode_batch([arr[a + 1 : b].tolist() for a, b in zip(bounds[:-1], bounds[1:])])


def test_built_with_counts_consistent_with_meta(real):
    cfg, data, logs, _ = real
    assert not data.reused and any("building" in m for m in logs)
    meta = data.meta
    assert data.vocab_size == meta["vocab_size"] == 512 and data.eot_id == meta["eot_id"] == 0
    assert meta["dtype"] == "uint16"
    total_docs = 0
    for split in ("train", "val"):
        info = meta["splits"][split]
        arr = data.split_tokens(split)
        assert isinstance(arr, np.memmap) and arr.dtype == np.uint16 and arr.ndim == 1
        assert info["tokens"] > 0 and len(arr) == info["tokens"] == sum(s["tokens"] for s in info["shards"])
        assert int((np.asarray(arr) == data.eot_id).sum()) == info["documents"] > 0
        assert arr[0] == data.eot_id and int(arr.max()) < data.vocab_size
        assert 1.5 < data.bytes_per_token(split) < 5.0
        total_docs += info["documents"]
    assert meta["splits"]["train"]["tokens"] > 10 * meta["splits"]["val"]["tokens"]
    files = [f for s in meta["sources"] for f in s["files"]]
    assert len(files) == 14 and all(len(f["sha256"]) == 64 and f["bytes"] > 0 for f in files)
    assert sum(s["documents"] for s in meta["sources"]) == total_docs
    assert meta["tokenizer"]["kind"] == "bpe" and len(meta["tokenizer"]["sha256"]) == 64
    assert meta["config"]["tokenizer"]["vocab_size"] == 512 and len(meta["fingerprint"]) == 64


def test_val_split_matches_seeded_hash_and_is_disjoint(real, decoded):
    cfg, data, _, _ = real
    sources = resolve_sources(cfg)
    docs = [d.text for d in iter_documents(cfg, sources)]
    plan = SplitPlan([doc_hash(t, cfg.seed) for t in docs], cfg.val_fraction)
    expected_val = [t for i, t in enumerate(docs) if plan.split_of(i) == "val"]
    val, train = decoded["val"], decoded["train"]
    assert val == expected_val  # byte-exact round trip through the tokenizer, in order
    assert len(train) + len(val) == len(docs)
    assert not set(val) & set(train)


def test_text_is_normalised(decoded):
    text = "".join(decoded["train"] + decoded["val"])
    assert "\r" not in text and "\ufffd" not in text and "\ufeff" not in text
    assert "Cæsar" in text or "Cæsar".upper() in text  # shakespeare-caesar.txt is Latin-1


def test_tokenizer_round_trips_and_loads_in_transformers(real):
    _, data, _, _ = real
    from transformers import PreTrainedTokenizerFast

    sample = "To be, or not to be: that is the question.\n  Cæsar — naïve café 😀\n"
    tok = data.load_tokenizer()
    assert tok.decode(tok.encode(sample).ids) == sample
    hf = PreTrainedTokenizerFast(tokenizer_file=str(data.tokenizer_path))
    assert hf.encode(sample) == tok.encode(sample).ids
    assert hf.convert_tokens_to_ids("<|endoftext|>") == data.eot_id


def test_second_prepare_reuses_quickly(real):
    cfg, data, _, _ = real
    logs: list[str] = []
    start = time.perf_counter()
    again = prepare(cfg, log=logs.append)
    elapsed = time.perf_counter() - start
    assert again.reused and again.fingerprint == data.fingerprint
    assert any("reusing" in m for m in logs)
    assert elapsed < 2.0, f"reuse took {elapsed:.2f}s"
    assert again.meta["created_at"] == data.meta["created_at"]


def test_moving_the_data_root_keeps_the_cache(real, tmp_path, monkeypatch):
    cfg, data, _, _ = real
    copied = tmp_path / "root"
    shutil.copytree(data_root(cfg).path / "corpus", copied / "corpus")
    monkeypatch.setenv("SCALELAB_DATA_ROOT", str(copied))
    assert prepare(cfg, log=lambda m: None).reused


def test_load_prepared_reads_and_rejects_damage(real, tmp_path):
    _, data, _, _ = real
    loaded = load_prepared(data.out_dir)
    assert loaded.meta == data.meta and len(loaded.split_tokens("val")) == len(data.split_tokens("val"))
    with pytest.raises(DataError, match="no prepared data"):
        load_prepared(tmp_path / "nothing")
    damaged = tmp_path / "damaged"
    shutil.copytree(data.out_dir, damaged)
    shard = damaged / data.meta["splits"]["val"]["shards"][0]["file"]
    shard.write_bytes(shard.read_bytes()[:-2])
    with pytest.raises(DataError, match="expected"):
        load_prepared(damaged)


G100 = CORPUS / "gutenberg100"


@pytest.mark.skipif(not (G100 / "train.txt.gz").is_file(), reason=f"gutenberg100 not found at {G100}")
def test_gutenberg100_books_are_whole_documents():
    """The preset reads each book between `<|endoftext|>` lines as one document (no tokenizer needed)."""
    import csv
    import gzip
    import hashlib

    from pretrain.data.normalize import normalize_text

    cfg = load_data_config(PROJECT_ROOT / "configs/data/gutenberg100.yaml", ["root=null"])
    for which, manifest in (("val_sources", "manifest.valid.tsv"), ("sources", "manifest.train.tsv")):
        rows = list(csv.DictReader(open(G100 / manifest, encoding="utf-8"), delimiter="\t"))
        docs = (d.text for d in iter_documents(cfg, resolve_sources(cfg, which)))
        n = 0
        for doc, row in zip(docs, rows, strict=True):
            n += 1
            if not doc[0].isspace():  # books that start indented lose that indentation to strip()
                same = hashlib.sha256((doc + "\n").encode()).hexdigest() == row["clean_sha256"]
                assert same or len(doc.encode()) < int(row["clean_utf8_bytes"]), row["title"]
        assert n == len(rows) == (26 if which == "val_sources" else 438)
    with gzip.open(G100 / "valid.txt.gz", "rt", encoding="utf-8") as fh:
        books = [normalize_text(b).strip() for b in fh.read().split("\n<|endoftext|>\n") if b.strip()]
    assert [d.text for d in iter_documents(cfg, resolve_sources(cfg, "val_sources"))] == books
