"""Input kinds (files, folders, globs, jsonl, HF datasets), tokenizer kinds and input errors,
on small corpora written into tmp dirs (seconds in all)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from pretrain.data.config import DataConfig
from pretrain.data.prepare import prepare
from pretrain.errors import DataError

QUIET = {"log": lambda msg: None}


def paragraphs(tag: str, n: int = 12) -> str:
    return "\n\n".join(f"{tag} paragraph {i}: the quick brown fox jumps over the lazy dog {i * 7}." for i in range(n))


def cfg(tmp_path: Path, sources, **kw) -> DataConfig:
    base = {
        "name": "t",
        "root": str(tmp_path),
        "sources": sources,
        "out_dir": str(tmp_path / "out"),
        "tokenizer": {"vocab_size": 300},
        "doc_chars": 100,
        "val_fraction": 0.2,
    }
    return DataConfig.model_validate({**base, **kw})


def decoded_docs(data, split: str) -> list[str]:
    arr = np.asarray(data.split_tokens(split))
    bounds = list(np.flatnonzero(arr == data.eot_id)) + [len(arr)]
    return data.load_tokenizer().decode_batch([arr[a + 1 : b].tolist() for a, b in zip(bounds[:-1], bounds[1:])])


def all_docs(data) -> list[str]:
    return decoded_docs(data, "train") + decoded_docs(data, "val")


def test_folder_recurses_over_txt_and_jsonl_and_skips_other_files(tmp_path):
    (tmp_path / "c" / "sub").mkdir(parents=True)
    (tmp_path / "c" / "a.txt").write_text(paragraphs("alpha"))
    (tmp_path / "c" / "sub" / "b.jsonl").write_text("\n".join(json.dumps({"text": f"beta row {i}"}) for i in range(5)))
    with gzip.open(tmp_path / "c" / "sub" / "c.jsonl.gz", "wt") as fh:
        fh.write("\n".join(json.dumps({"text": f"gamma row {i}"}) for i in range(3)))
    (tmp_path / "c" / "README.md").write_text("not corpus text")
    data = prepare(cfg(tmp_path, ["c"]), **QUIET)
    docs = all_docs(data)
    assert sum("beta row" in d for d in docs) == 5 and sum("gamma row" in d for d in docs) == 3
    assert any("alpha paragraph" in d for d in docs) and not any("corpus text" in d for d in docs)
    assert [Path(f["path"]).name for f in data.meta["sources"][0]["files"]] == ["a.txt", "b.jsonl", "c.jsonl.gz"]


def test_jsonl_with_a_custom_text_field(tmp_path):
    rows = [{"id": i, "content": f"document number {i} with some text"} for i in range(10)] + [
        {"id": 99, "content": ""}
    ]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    data = prepare(cfg(tmp_path, [{"path": "d.jsonl", "text_field": "content"}]), **QUIET)
    assert (
        data.meta["splits"]["train"]["documents"] + data.meta["splits"]["val"]["documents"] == 10
    )  # empty row skipped
    assert sorted(all_docs(data)) == sorted(r["content"] for r in rows[:10])


def test_jsonl_missing_text_field_names_it(tmp_path):
    (tmp_path / "d.jsonl").write_text(json.dumps({"body": "x"}) + "\n")
    with pytest.raises(DataError, match=r"no field 'text'.*fields: body"):
        prepare(cfg(tmp_path, ["d.jsonl"]), **QUIET)


def test_max_documents_caps_a_source(tmp_path):
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps({"text": f"row {i} text"}) for i in range(50)))
    data = prepare(cfg(tmp_path, [{"path": "d.jsonl", "max_documents": 7}]), **QUIET)
    assert data.meta["sources"][0]["documents"] == 7


def test_crlf_latin1_and_bom_inputs_are_normalised(tmp_path):
    (tmp_path / "latin1.txt").write_bytes(paragraphs("Cæsar café").encode("latin-1"))
    (tmp_path / "crlf.txt").write_bytes(paragraphs("windows\nline").replace("\n", "\r\n").encode())
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + paragraphs("bom").encode())
    data = prepare(cfg(tmp_path, ["*.txt"]), **QUIET)
    text = "".join(all_docs(data))
    assert "Cæsar café" in text and "windows\nline" in text
    assert "\r" not in text and "\ufffd" not in text and "\ufeff" not in text


def test_glob_matching_nothing_is_an_error_naming_it(tmp_path):
    (tmp_path / "a.txt").write_text(paragraphs("a"))
    with pytest.raises(DataError, match=r"'nothing/\*\.txt' matched no files"):
        prepare(cfg(tmp_path, ["a.txt", "nothing/*.txt"]), **QUIET)
    assert not (tmp_path / "out").exists()


def test_empty_corpus_is_an_error(tmp_path):
    (tmp_path / "empty.txt").write_text("\n\n   \n")
    (tmp_path / "rows.jsonl").write_text(json.dumps({"text": ""}) + "\n")
    with pytest.raises(DataError, match="empty corpus"):
        prepare(cfg(tmp_path, ["empty.txt", "rows.jsonl"]), **QUIET)
    assert not (tmp_path / "out").exists()


def test_single_document_cannot_be_split(tmp_path):
    (tmp_path / "one.txt").write_text("just one short document")
    with pytest.raises(DataError, match="at least 2"):
        prepare(cfg(tmp_path, ["one.txt"]), **QUIET)


def test_two_documents_give_one_train_and_one_val(tmp_path):
    (tmp_path / "two.jsonl").write_text(
        json.dumps({"text": "first doc"}) + "\n" + json.dumps({"text": "second doc"}) + "\n"
    )
    data = prepare(cfg(tmp_path, ["two.jsonl"], val_fraction=0.01), **QUIET)
    assert data.meta["splits"]["train"]["documents"] == 1 and data.meta["splits"]["val"]["documents"] == 1


def test_missing_data_root_names_the_path_and_public_origins(tmp_path, monkeypatch):
    missing = tmp_path / "no-such-root"
    with pytest.raises(DataError) as err:
        prepare(cfg(tmp_path, ["corpus/tinyshakespeare.txt"], root=str(missing)), **QUIET)
    msg = str(err.value)
    assert str(missing) in msg and "data.root" in msg
    assert "karpathy/char-rnn" in msg and "tiny_shakespeare" in msg and "nltk.downloader gutenberg" in msg
    monkeypatch.setenv("SCALELAB_DATA_ROOT", str(missing))
    with pytest.raises(DataError, match=r"\$SCALELAB_DATA_ROOT"):
        prepare(cfg(tmp_path, ["corpus/gutenberg/*.txt"], root=None), **QUIET)


def test_missing_default_corpus_file_names_tried_path_and_origin(tmp_path):
    with pytest.raises(DataError) as err:
        prepare(cfg(tmp_path, ["corpus/tinyshakespeare.txt"]), **QUIET)
    assert str(tmp_path / "corpus" / "tinyshakespeare.txt") in str(err.value) and "karpathy/char-rnn" in str(err.value)


def test_refuses_to_replace_a_foreign_output_folder(tmp_path):
    (tmp_path / "a.txt").write_text(paragraphs("a"))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "precious.txt").write_text("keep me")
    with pytest.raises(DataError, match="not a prepared data folder"):
        prepare(cfg(tmp_path, ["a.txt"]), **QUIET)
    assert (tmp_path / "out" / "precious.txt").read_text() == "keep me"


def test_hf_dataset_saved_to_disk_and_local_json(tmp_path):
    import datasets

    texts = [f"hugging face row {i}: some words here" for i in range(20)]
    datasets.Dataset.from_dict({"text": texts, "n": list(range(20))}).save_to_disk(str(tmp_path / "saved"))
    data = prepare(cfg(tmp_path, [{"hf_dataset": str(tmp_path / "saved"), "max_documents": 15}]), **QUIET)
    assert sorted(all_docs(data)) == sorted(texts[:15])
    assert data.meta["sources"][0]["hf_dataset"] == str(tmp_path / "saved")

    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps({"body": t}) for t in texts))
    data = prepare(
        cfg(tmp_path, [{"hf_dataset": "rows.jsonl", "text_field": "body"}], out_dir=str(tmp_path / "out2")), **QUIET
    )
    assert sorted(all_docs(data)) == sorted(texts)


def test_hf_hub_dataset_offline_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="could not load hf_dataset 'surely/not-a-cached-dataset'"):
        prepare(cfg(tmp_path, [{"hf_dataset": "surely/not-a-cached-dataset"}]), **QUIET)


def test_gpt2_tokenizer_offline(tmp_path):
    (tmp_path / "a.txt").write_text(paragraphs("Hello world"))
    data = prepare(cfg(tmp_path, ["a.txt"], tokenizer={"kind": "gpt2"}), **QUIET)
    assert data.eot_id == 50256 and data.vocab_size == 50257 and data.dtype == np.uint16
    tok = data.load_tokenizer()
    assert tok.encode("Hello world").ids == [15496, 995]
    assert tok.encode("<|endoftext|>").ids == [50256]
    assert int(np.asarray(data.split_tokens("train"))[0]) == 50256


def test_hf_tokenizer_from_file_and_folder(tmp_path):
    (tmp_path / "a.txt").write_text(paragraphs("alpha"))
    base = prepare(cfg(tmp_path, ["a.txt"]), **QUIET)
    (tmp_path / "tokdir").mkdir()
    (tmp_path / "tokdir" / "tokenizer.json").write_bytes(base.tokenizer_path.read_bytes())
    for i, path in enumerate((str(base.tokenizer_path), str(tmp_path / "tokdir"))):
        data = prepare(
            cfg(tmp_path, ["a.txt"], tokenizer={"kind": "hf", "path": path}, out_dir=str(tmp_path / f"hf{i}")), **QUIET
        )
        assert data.meta["tokenizer"]["kind"] == "hf" and data.eot_id == base.eot_id
        for split in ("train", "val"):
            assert np.array_equal(data.split_tokens(split), base.split_tokens(split))


def test_hf_tokenizer_missing_path(tmp_path):
    (tmp_path / "a.txt").write_text(paragraphs("alpha"))
    with pytest.raises(DataError, match="tokenizer.path 'nope.json' not found"):
        prepare(cfg(tmp_path, ["a.txt"], tokenizer={"kind": "hf", "path": "nope.json"}), **QUIET)


def test_several_shards_per_split(tmp_path):
    (tmp_path / "a.txt").write_text(paragraphs("alpha", n=60))
    one = prepare(cfg(tmp_path, ["a.txt"]), **QUIET)
    many = prepare(cfg(tmp_path, ["a.txt"], shard_tokens=100, out_dir=str(tmp_path / "many")), **QUIET)
    assert len(many.meta["splits"]["train"]["shards"]) > 3
    assert np.array_equal(many.split_tokens("train"), one.split_tokens("train"))
    for shard in many.split_shards("train"):
        assert shard[0] == many.eot_id  # shards start at document boundaries


def test_literal_endoftext_in_text_is_not_a_document_boundary(tmp_path):
    rows = [f"doc {i} mentions <|endoftext|> in its text" for i in range(6)]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in rows))
    data = prepare(cfg(tmp_path, ["d.jsonl"]), **QUIET)
    n_eot = sum(int((np.asarray(data.split_tokens(s)) == data.eot_id).sum()) for s in ("train", "val"))
    assert n_eot == 6 and sorted(all_docs(data)) == sorted(rows)


def book(i: int) -> str:
    return "\n\n".join(f"Book {i}, paragraph {p}: call me Ishmael, some years ago {p * i}." for p in range(8))


def test_delimited_gzip_books_stay_whole_with_a_given_validation_file(tmp_path):
    """gutenberg100's layout: BOOK\\n<|endoftext|>\\n repeated, gzip, train and valid given apart."""
    with gzip.open(tmp_path / "train.txt.gz", "wt") as fh:
        fh.write("".join(book(i) + "\n<|endoftext|>\n" for i in range(6)))
    with gzip.open(tmp_path / "valid.txt.gz", "wt") as fh:
        fh.write("".join(book(i) + "\n<|endoftext|>\n" for i in (100, 101)))
    data = prepare(cfg(tmp_path, ["train.txt.gz"], val_sources=["valid.txt.gz"], doc_chars=None), **QUIET)
    assert decoded_docs(data, "train") == [book(i) for i in range(6)]
    assert decoded_docs(data, "val") == [book(100), book(101)]
    meta = data.meta
    assert meta["split"] == {"kind": "given", "val_sources": 1}
    assert meta["val_sources"][0]["documents"] == 2 and meta["sources"][0]["documents"] == 6
    assert meta["splits"]["train"]["unique_tokens"] == meta["splits"]["train"]["tokens"]
    # with doc_chars the books are cut at paragraph breaks, still never across a delimiter
    cut = prepare(
        cfg(tmp_path, ["train.txt.gz"], val_sources=["valid.txt.gz"], doc_chars=150, out_dir=str(tmp_path / "cut")),
        **QUIET,
    )
    train = decoded_docs(cut, "train")
    assert len(train) > 12 and "\n\n".join(train) == "\n\n".join(book(i) for i in range(6))


def test_changing_the_validation_file_rebuilds(tmp_path):
    (tmp_path / "t.txt").write_text(paragraphs("train"))
    (tmp_path / "v.txt").write_text(paragraphs("val"))
    prepare(cfg(tmp_path, ["t.txt"], val_sources=["v.txt"]), **QUIET)
    (tmp_path / "v.txt").write_text(paragraphs("val changed"))
    logs: list[str] = []
    again = prepare(cfg(tmp_path, ["t.txt"], val_sources=["v.txt"]), log=logs.append)
    assert not again.reused and any("changed: v.txt" in m for m in logs)


def test_empty_validation_source_is_an_error_naming_it(tmp_path):
    (tmp_path / "t.txt").write_text(paragraphs("train"))
    (tmp_path / "v.txt").write_text("\n\n")
    with pytest.raises(DataError, match=r"empty validation split: data.val_sources \(v.txt\)"):
        prepare(cfg(tmp_path, ["t.txt"], val_sources=["v.txt"]), **QUIET)


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".jsonl.xz", ".jsonl.zst"])
def test_compressed_jsonl(tmp_path, suffix):
    import lzma

    rows = "".join(json.dumps({"text": f"row {i}: compressed json lines"}) + "\n" for i in range(12)).encode()
    if suffix.endswith(".gz"):
        data = gzip.compress(rows)
    elif suffix.endswith(".xz"):
        data = lzma.compress(rows)
    else:
        data = pytest.importorskip("zstandard").ZstdCompressor().compress(rows)
    (tmp_path / f"d{suffix}").write_bytes(data)
    got = prepare(cfg(tmp_path, [f"d{suffix}"]), **QUIET)
    assert sorted(all_docs(got)) == sorted(f"row {i}: compressed json lines" for i in range(12))


def test_parquet_text_column_streamed_in_batches(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pretrain.data import readers

    texts = [f"parquet row {i} with words" for i in range(25)] + [None]
    pq.write_table(pa.table({"id": list(range(26)), "body": texts}), tmp_path / "d.parquet", row_group_size=10)
    monkeypatch.setattr(readers, "PARQUET_BATCH_ROWS", 4)
    data = prepare(cfg(tmp_path, [{"path": "d.parquet", "text_field": "body"}]), **QUIET)
    assert sorted(all_docs(data)) == sorted(texts[:25])  # the null row is skipped
    with pytest.raises(DataError, match=r"no column 'text'.*columns: id, body"):
        prepare(cfg(tmp_path, ["d.parquet"], out_dir=str(tmp_path / "o2")), **QUIET)
    pq.write_table(pa.table({"text": [1, 2]}), tmp_path / "n.parquet")
    with pytest.raises(DataError, match="column 'text' is int64, expected text"):
        prepare(cfg(tmp_path, ["n.parquet"], out_dir=str(tmp_path / "o3")), **QUIET)


def test_folder_picks_up_compressed_and_parquet_files(tmp_path):
    import lzma

    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt.xz").write_bytes(lzma.compress(paragraphs("xz").encode()))
    pq.write_table(pa.table({"text": ["from parquet"] * 2}), tmp_path / "c" / "b.parquet")
    data = prepare(cfg(tmp_path, ["c"]), **QUIET)
    assert [Path(f["path"]).name for f in data.meta["sources"][0]["files"]] == ["a.txt.xz", "b.parquet"]
    docs = all_docs(data)
    assert any("xz paragraph" in d for d in docs) and docs.count("from parquet") == 2


def test_duplicate_documents_count_once_in_unique_tokens(tmp_path):
    rows = [f"unique document {i}" for i in range(8)] + ["a repeated document"] * 5
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in rows))
    data = prepare(cfg(tmp_path, ["d.jsonl"], val_fraction=0.1), **QUIET)
    splits = data.meta["splits"]
    side = next(s for s in ("train", "val") if "a repeated document" in decoded_docs(data, s))
    assert splits[side]["duplicate_documents"] == 4  # identical texts hash alike: one side, counted once
    per_copy = len(data.load_tokenizer().encode("a repeated document").ids) + 1  # + its end-of-text
    assert splits[side]["unique_tokens"] == splits[side]["tokens"] - 4 * per_copy
    assert data.unique_tokens(side) == splits[side]["unique_tokens"]
