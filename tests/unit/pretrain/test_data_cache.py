"""Cache reuse, change detection, split stability and atomic writes on a small tmp corpus."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


from pretrain.data.config import DataConfig
from pretrain.data.prepare import load_prepared, prepare


def paragraphs(tag: str, n: int = 20) -> str:
    return "\n\n".join(f"{tag} paragraph {i}: the quick brown fox jumps over the lazy dog {i * 7}." for i in range(n))


@pytest.fixture
def corpus(tmp_path) -> Path:
    root = tmp_path / "root"
    (root / "books").mkdir(parents=True)
    (root / "books" / "a.txt").write_text(paragraphs("alpha"))
    (root / "books" / "b.txt").write_text(paragraphs("beta"))
    (root / "books" / "c.txt").write_bytes(paragraphs("Cæsar\nsaid").replace("\n", "\r\n").encode("latin-1"))
    return root


def make_cfg(root: Path, **kw) -> DataConfig:
    base = {
        "name": "small",
        "root": str(root),
        "sources": ["books/*.txt"],
        "out_dir": str(root.parent / "out"),
        "tokenizer": {"vocab_size": 300},
        "doc_chars": 150,
        "val_fraction": 0.2,
    }
    return DataConfig.model_validate({**base, **kw})


def run(cfg: DataConfig, **kw):
    logs: list[str] = []
    data = prepare(cfg, log=logs.append, **kw)
    return data, "\n".join(logs)


def val_texts(data) -> set[str]:
    arr = np.asarray(data.split_tokens("val"))
    bounds = list(np.flatnonzero(arr == data.eot_id)) + [len(arr)]
    return set(data.load_tokenizer().decode_batch([arr[a + 1 : b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]))


def test_unchanged_inputs_are_reused(corpus):
    first, log1 = run(make_cfg(corpus))
    second, log2 = run(make_cfg(corpus))
    assert not first.reused and "no prepared data yet" in log1
    assert second.reused and "reusing" in log2 and second.fingerprint == first.fingerprint
    assert second.meta["created_at"] == first.meta["created_at"]


def test_force_rebuilds(corpus):
    first, _ = run(make_cfg(corpus))
    again, log = run(make_cfg(corpus), force=True)
    assert not again.reused and "forced" in log and again.fingerprint == first.fingerprint


def test_modified_input_file_is_detected(corpus):
    first, _ = run(make_cfg(corpus))
    with open(corpus / "books" / "b.txt", "a") as fh:
        fh.write("\n\nan extra closing paragraph about something new.")
    second, log = run(make_cfg(corpus))
    assert not second.reused and "changed: books/b.txt" in log
    assert second.fingerprint != first.fingerprint
    assert second.meta["splits"]["train"]["bytes"] + second.meta["splits"]["val"]["bytes"] > (
        first.meta["splits"]["train"]["bytes"] + first.meta["splits"]["val"]["bytes"]
    )


def test_added_and_removed_files_are_detected(corpus):
    run(make_cfg(corpus))
    (corpus / "books" / "d.txt").write_text(paragraphs("delta"))
    _, log = run(make_cfg(corpus))
    assert "added: books/d.txt" in log
    (corpus / "books" / "a.txt").unlink()
    _, log = run(make_cfg(corpus))
    assert "removed: books/a.txt" in log


def test_tokenizer_and_split_settings_are_detected(corpus):
    run(make_cfg(corpus))
    data, log = run(make_cfg(corpus, tokenizer={"vocab_size": 320}))
    assert not data.reused and "tokenizer changed" in log and "vocab_size 300 -> 320" in log
    data, log = run(make_cfg(corpus, tokenizer={"vocab_size": 320}, seed=3))
    assert not data.reused and "seed 0 -> 3" in log
    data, log = run(make_cfg(corpus, tokenizer={"kind": "gpt2"}))
    assert not data.reused and data.eot_id == 50256 and "tokenizer changed" in log


def test_split_is_stable_when_another_file_changes(corpus):
    cfg = make_cfg(corpus, sources=["books/a.txt", "books/b.txt"], val_fraction=0.3)
    before = {t for t in val_texts(run(cfg)[0]) if t.startswith("alpha")}
    (corpus / "books" / "b.txt").write_text(paragraphs("beta changed", n=35))
    after = {t for t in val_texts(run(cfg)[0]) if t.startswith("alpha")}
    assert before and before == after


def test_failed_build_keeps_the_previous_output(corpus, monkeypatch):
    good, _ = run(make_cfg(corpus))
    (corpus / "books" / "b.txt").write_text(paragraphs("beta v2"))
    from pretrain.data import shards

    def boom(self, ids):
        raise RuntimeError("disk full")

    monkeypatch.setattr(shards.ShardWriter, "write", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        run(make_cfg(corpus))
    assert load_prepared(good.out_dir).fingerprint == good.fingerprint
    assert sorted(p.name for p in good.out_dir.parent.iterdir()) == [".out.lock", "out", "root"]


def test_bpe_is_trained_on_a_seeded_sample_independent_of_file_order(corpus):
    data, log = run(make_cfg(corpus, tokenizer={"vocab_size": 300, "sample_chars": 500}))
    sample = data.meta["tokenizer"]["sample"]
    assert "a seeded sample of" in log and sample["sample_chars"] == 500
    assert 1 <= sample["documents"] < sample["train_documents"] == data.meta["splits"]["train"]["documents"]
    assert 500 <= sample["chars"] < sample["train_chars"]
    full, log = run(make_cfg(corpus, out_dir=str(corpus.parent / "full")))
    assert "the whole train split" in log and full.meta["tokenizer"]["sample"]["documents"] == sample["train_documents"]
    assert data.meta["tokenizer"]["sha256"] != full.meta["tokenizer"]["sha256"]
    # the sample is a function of the documents and the seed, not of where they come from
    reordered, _ = run(
        make_cfg(
            corpus,
            sources=["books/c.txt", "books/b.txt", "books/a.txt"],
            out_dir=str(corpus.parent / "rev"),
            tokenizer={"vocab_size": 300, "sample_chars": 500},
        )
    )
    assert reordered.meta["tokenizer"]["sha256"] == data.meta["tokenizer"]["sha256"]
    other_seed, _ = run(
        make_cfg(corpus, seed=1, out_dir=str(corpus.parent / "s1"), tokenizer={"vocab_size": 300, "sample_chars": 500})
    )
    assert other_seed.meta["tokenizer"]["sample"] != sample


def test_old_train_max_chars_key_is_read_as_sample_chars(corpus):
    assert make_cfg(corpus, tokenizer={"train_max_chars": 1234}).tokenizer.sample_chars == 1234
