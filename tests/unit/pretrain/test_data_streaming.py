"""Streaming pieces of `prepare`: compressed readers, the streamed document cutter, chunked and
parallel encoding, the token stream over shards (no tokenizer training needed except where noted)."""

from __future__ import annotations

import gzip
import lzma
import random
from pathlib import Path

import numpy as np
import pytest

from pretrain.data import encode as enc
from pretrain.data.config import SourceConfig
from pretrain.data.normalize import cut_lines, split_documents
from pretrain.data.readers import iter_lines
from pretrain.data.sources import _file_documents
from pretrain.data.tokens import TokenStream
from pretrain.errors import DataError

BOOK = "Chapter {i}.\n\nIt was a dark night; the wind\nblew hard.  Said she: 'no!'\n\n   Indented line {i}\n\n\n"


def write(path: Path, text: str) -> Path:
    data = text.encode("utf-8")
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(data))
    elif path.name.endswith(".xz"):
        path.write_bytes(lzma.compress(data))
    elif path.name.endswith(".zst"):
        zstandard = pytest.importorskip("zstandard")
        path.write_bytes(zstandard.ZstdCompressor().compress(data))
    else:
        path.write_bytes(data)
    return path


@pytest.mark.parametrize("suffix", [".txt", ".txt.gz", ".txt.xz", ".txt.zst"])
def test_compressed_text_streams_the_same_documents(tmp_path, suffix):
    text = "".join(BOOK.format(i=i) * 3 + "<|endoftext|>\n" for i in range(5))
    path = write(tmp_path / f"books{suffix}", text)
    src = SourceConfig(path=path.name)
    assert list(_file_documents(path, src, None, "<|endoftext|>")) == [(BOOK.format(i=i) * 3).strip() for i in range(5)]
    # no delimiter: the marker is text, and doc_chars cuts at paragraph breaks as on the whole text
    assert list(_file_documents(path, src, 60, None)) == list(split_documents(text, 60))


def test_a_damaged_gzip_yields_its_documents_then_names_the_file(tmp_path):
    """Reading is streamed: the documents before the damage arrive before the error does."""
    good = "".join(f"book {i} " * 2000 + "\n<|endoftext|>\n" for i in range(3))
    data = gzip.compress(good.encode() * 20)
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(data[: len(data) // 2])
    docs = _file_documents(path, SourceConfig(path=path.name), None, "<|endoftext|>")
    first = next(docs)
    assert first.startswith("book 0 book 0")
    with pytest.raises(DataError, match=r"cut\.txt\.gz: not a valid gzip file or truncated"):
        list(docs)


def test_zst_without_the_package_is_a_clear_error(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_zstd(name, *a, **k):
        if name == "zstandard":
            raise ImportError(name)
        return real(name, *a, **k)

    (tmp_path / "a.txt.zst").write_bytes(b"\x28\xb5\x2f\xfd")
    monkeypatch.setattr(builtins, "__import__", no_zstd)
    with pytest.raises(DataError, match="needs the `zstandard` package"):
        list(iter_lines(tmp_path / "a.txt.zst"))


def test_delimiter_lines_end_documents_and_are_dropped():
    lines = [
        "first\n",
        "doc\n",
        "  <|endoftext|>  \n",
        "\n",
        "second doc\n",
        "<|endoftext|>\n",
        "<|endoftext|>\n",
        "tail",
    ]
    assert list(cut_lines(lines, None, "<|endoftext|>")) == ["first\ndoc", "second doc", "tail"]
    assert list(cut_lines(["a <|endoftext|> b\n"], None, "<|endoftext|>")) == ["a <|endoftext|> b"]  # only whole lines
    assert list(cut_lines(lines[:3], None, None)) == ["first\ndoc\n  <|endoftext|>"]


def test_streamed_cutting_equals_cutting_the_whole_text():
    rng = random.Random(0)
    atoms = ["word ", "line\n", "\n\n", "\n \t\n", "x" * 40, " ", "\n", "\u00a0", "\n\n\n\n"]
    for _ in range(300):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 600)))
        doc_chars = rng.choice([1, 7, 30, 100, 400])
        step = rng.choice([1, 5, 64, 1000])
        chunks = [text[i : i + step] for i in range(0, len(text), step)]
        assert list(cut_lines(chunks, doc_chars, None)) == list(split_documents(text, doc_chars))


def test_long_text_without_breaks_is_cut_at_lines_while_streaming(monkeypatch):
    from pretrain.data import normalize

    monkeypatch.setattr(normalize, "FEED_CHARS", 100)
    text = "".join(f"line {i} of a long text without blank lines\n" for i in range(2000))
    docs = cut_lines(text.splitlines(keepends=True), 500, None)
    first = next(docs)  # emitted long before the text ends
    assert len(first) >= 500 and [first, *docs] == list(split_documents(text, 500))


def test_safe_pieces_encode_exactly_like_whole_documents():
    from pretrain.data.tokenizer import load_gpt2

    tok = load_gpt2()
    tok.encode_special_tokens = True
    assert enc.chunk_safe(tok)
    rng = random.Random(1)
    atoms = ["The ", "cat", "\n", "\n\n", "  ", "\t", "'s ", "42", "!?", "é", " \n", "<|endoftext|>", "\u3000", "x\ny"]
    texts = ["".join(rng.choice(atoms) for _ in range(rng.randint(1, 3000))) for _ in range(40)]
    for text in texts:
        parts = enc.pieces(text, size=50)
        assert "".join(parts) == text
        joined = [i for p in parts for i in tok.encode(p, add_special_tokens=False).ids]
        assert joined == tok.encode(text, add_special_tokens=False).ids


def test_pool_and_in_process_encoding_agree_in_order(monkeypatch):
    from pretrain.data.tokenizer import load_gpt2

    tok = load_gpt2()
    tok.encode_special_tokens = True
    docs = [(i, f"Document {i}.\nIt has lines\nand more lines.\n" * (1 + i % 7) * 40) for i in range(60)]
    single = list(enc.Encoder(tok, np.uint16, workers=1).encode(docs))
    monkeypatch.setattr(enc, "POOL_MIN_CHARS", 10_000)
    monkeypatch.setattr(enc, "TASK_CHARS", 3_000)
    monkeypatch.setattr(enc, "PIECE_CHARS", 500)
    pooled_encoder = enc.Encoder(tok, np.uint16, workers=2)
    pooled = list(pooled_encoder.encode(docs))
    assert pooled_encoder.pool_workers == 2
    assert [m for m, _ in pooled] == list(range(60))
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(single, pooled))
    assert np.array_equal(single[3][1], np.array(tok.encode(docs[3][1], add_special_tokens=False).ids))


def test_token_stream_reads_across_shards():
    full = np.arange(1000, dtype=np.uint16)
    cuts = [0, 1, 5, 5, 300, 301, 999, 1000]
    stream = TokenStream([full[a:b] for a, b in zip(cuts[:-1], cuts[1:])])
    assert len(stream) == 1000 and np.array_equal(np.asarray(stream), full)
    rng = np.random.default_rng(0)
    for _ in range(200):
        a = int(rng.integers(0, 1000))
        b = int(rng.integers(a, 1001))
        assert np.array_equal(stream[a:b], full[a:b])
    assert stream[999] == 999 and stream[-1] == 999 and len(stream[990:2000]) == 10
