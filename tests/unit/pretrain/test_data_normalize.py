"""Text normalisation, document cutting and the document-level split (no tokenizer needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pretrain
from pretrain.data.config import SourceConfig
from pretrain.data.normalize import decode_bytes, normalize_text, split_documents
from pretrain.data.shards import token_dtype
from pretrain.data.sources import _file_documents
from pretrain.data.split import SplitPlan, doc_hash
from pretrain.errors import DataError

GUTENBERG = Path(pretrain.__file__).resolve().parents[1].parent / "shared" / "data" / "corpus" / "gutenberg"
needs_corpus = pytest.mark.skipif(not GUTENBERG.is_dir(), reason=f"bundled corpus not found at {GUTENBERG}")


def test_decode_utf8_latin1_and_bom():
    assert decode_bytes("Cæsar".encode()) == "Cæsar"
    assert decode_bytes("Cæsar".encode("latin-1")) == "Cæsar"
    assert decode_bytes("\ufeffhello".encode("utf-8")) == "hello"


def test_normalize_line_endings_nfc_and_bom():
    assert normalize_text("a\r\nb\rc\n") == "a\nb\nc\n"
    assert normalize_text("\ufeffx") == "x"
    assert normalize_text("e\u0301") == "\u00e9"  # NFC composes


def test_split_documents_cuts_at_paragraphs():
    paras = [f"paragraph {i}" + " word" * 20 for i in range(30)]
    docs = list(split_documents("\n\n".join(paras), doc_chars=300))
    assert len(docs) > 5
    assert all(d == d.strip() and d for d in docs)
    assert "\n\n".join(docs) == "\n\n".join(paras)  # nothing lost, cuts only at blank lines
    assert all(len(d) >= 300 for d in docs[:-1])


def test_split_documents_without_blank_lines_cuts_at_lines():
    text = "\n".join(f"line {i} " + "x" * 50 for i in range(200))
    docs = list(split_documents(text, doc_chars=500))
    assert len(docs) > 10 and "\n".join(docs) == text


def test_doc_hash_is_seeded_and_deterministic():
    assert doc_hash("abc", 0) == doc_hash("abc", 0)
    assert doc_hash("abc", 0) != doc_hash("abc", 1)
    assert 0 <= doc_hash("abc", 0) < 1


def test_split_plan_guarantees_one_doc_each_side():
    plan = SplitPlan([0.9, 0.8], val_fraction=0.05)  # no hash under the threshold
    assert plan.val == {1}
    plan = SplitPlan([0.01, 0.02], val_fraction=0.49)  # all under it
    assert plan.val == {0}
    with pytest.raises(DataError, match="at least 2"):
        SplitPlan([0.3], val_fraction=0.1)


def test_token_dtype():
    assert token_dtype(4096) == np.uint16 and token_dtype(50257) == np.uint16 and token_dtype(65536) == np.uint16
    assert token_dtype(65537) == np.uint32


@needs_corpus
@pytest.mark.parametrize("name, marker", [("shakespeare-caesar.txt", "æ"), ("melville-moby_dick.txt", None)])
def test_real_latin1_and_crlf_files_decode_cleanly(name, marker):
    raw = (GUTENBERG / name).read_bytes()
    if marker is None:
        assert b"\r\n" in raw  # the CRLF file
    else:
        with pytest.raises(UnicodeDecodeError):
            raw.decode("utf-8")  # the Latin-1 file
    docs = list(_file_documents(GUTENBERG / name, SourceConfig(path=name), 20_000))
    text = "".join(docs)
    assert len(docs) > 1
    assert "\ufffd" not in text and "\r" not in text
    if marker:
        assert marker in text


@pytest.mark.parametrize(
    "path",
    sorted((Path(pretrain.__file__).resolve().parents[1] / "configs" / "data").glob("*.yaml")),
    ids=lambda p: p.name,
)
def test_shipped_data_configs_validate(path):
    from pretrain.data.load import load_data_config

    cfg = load_data_config(path)
    assert cfg.sources and cfg.name
