"""Preparation in K tasks (pretrain.data.units / tasks / prepare_tasks), tasks run in this process.

The promise: each split's token stream (its sha256 in meta.json) is the same for 1 task and for K;
documents are never cut; a changed file reruns only its tasks; finished tasks are kept."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from pretrain.data.config import DataConfig  # noqa: E402
from pretrain.data.prepare import prepare  # noqa: E402
from pretrain.data.prepare_tasks import prepare_in_tasks, run_inline  # noqa: E402
from pretrain.data.sources import iter_documents, resolve_sources  # noqa: E402
from pretrain.data.units import group_units, plan_units, unit_documents  # noqa: E402
from tests.helpers.models import tiny_tokenizer  # noqa: E402

WORDS = "the quick brown fox jumps over a lazy dog alpha beta gamma river mountain city garden".split()


def para(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def write_corpus(root: Path, seed: int = 0) -> Path:
    """Plain text with delimiters (a BOM, CRLF, a Latin-1 line mid-file), JSON Lines, Parquet (3 row groups)."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    docs = ["\n\n".join(para(rng, rng.randint(5, 40)) for _ in range(rng.randint(1, 6))) for _ in range(40)]
    (root / "a.txt").write_bytes(b"\xef\xbb\xbf" + "".join(d + "\r\n<|endoftext|>\r\n" for d in docs).encode())
    with open(root / "b.jsonl", "w") as fh:
        for _ in range(60):
            fh.write(json.dumps({"text": para(rng, rng.randint(5, 80))}) + "\n")
    with open(root / "c.txt", "wb") as fh:
        for i in range(12):
            fh.write(("\n\n".join(para(rng, 30) for _ in range(4)) + "\n<|endoftext|>\n").encode())
            if i == 5:
                fh.write("Cæsar said é, and more\n".encode("latin-1"))  # from here on the file reads as Latin-1...
            if i == 10:
                fh.write("a naïve café\n".encode())  # ...UTF-8 bytes too, in every layout
    table = pa.table({"text": [para(rng, rng.randint(5, 50)) for _ in range(45)]})
    pq.write_table(table, root / "d.parquet", row_group_size=15)
    return root


def make_cfg(root: Path, out: Path, **kw) -> DataConfig:
    base = {
        "name": "tasks",
        "root": str(root),
        "sources": ["a.txt", "b.jsonl", "c.txt", "d.parquet"],
        "out_dir": str(out),
        "tokenizer": {"vocab_size": 300},
        "doc_chars": 150,
        "val_fraction": 0.1,
    }
    return DataConfig.model_validate({**base, **kw})


def streams(data) -> dict:
    return {s: (v["sha256"], v["tokens"], v["documents"], v["unique_tokens"]) for s, v in data.meta["splits"].items()}


def test_units_yield_the_whole_stream_with_documents_whole(tmp_path):
    root = write_corpus(tmp_path / "root")
    cfg = make_cfg(root, tmp_path / "out")
    sources = resolve_sources(cfg)
    whole = [d.text for d in iter_documents(cfg, sources)]
    for k in (1, 3, 8):
        units = plan_units(cfg, sources, None, k)
        kinds = {u.kind for u in units}
        assert k < 8 or {"bytes", "rows"} <= kinds, kinds  # text, JSONL and Parquet are cut when asked
        got = [d.text for u in units for d in unit_documents(cfg, sources, u)]
        assert got == whole
        groups = group_units(units, k)
        assert len(groups) <= k and [u for g in groups for u in g] == units


def test_one_two_four_tasks_give_the_same_token_streams(tmp_path):
    root = write_corpus(tmp_path / "root")
    one = prepare(make_cfg(root, tmp_path / "one"), log=lambda m: None)
    assert [t["id"] for t in one.meta["tasks"]] == [0] and one.meta["tasks"][0]["done"]
    for k in (2, 4):
        data = prepare_in_tasks(make_cfg(root, tmp_path / f"k{k}"), k, run_inline, log=lambda m: None)
        assert streams(data) == streams(one)
        assert data.meta["tokenizer"]["sha256"] == one.meta["tokenizer"]["sha256"]
        assert data.fingerprint == one.fingerprint
        assert [t["id"] for t in data.meta["tasks"]] == list(range(k))
        assert all(t["done"] and t["inputs"] for t in data.meta["tasks"])
        assert sum(t["tokens"] for t in data.meta["tasks"]) == data.num_tokens("train") + data.num_tokens("val")
        for s in ("train", "val"):
            assert np.array_equal(np.asarray(data.split_tokens(s)), np.asarray(one.split_tokens(s)))
        assert (tmp_path / f".k{k}.tasks" / "task-0000" / "manifest.json").is_file()  # kept for the next build


def test_a_tiny_corpus_gets_the_same_forced_split(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    for i in range(3):
        (root / f"{i}.txt").write_text(f"document number {i} about the quick brown fox\n")
    cfg = lambda out: make_cfg(root, out, sources=["*.txt"], val_fraction=0.01)  # noqa: E731
    one = prepare(cfg(tmp_path / "one"), log=lambda m: None)
    three = prepare_in_tasks(cfg(tmp_path / "three"), 3, run_inline, log=lambda m: None)
    assert one.meta["split"]["forced"] and three.meta["split"]["forced"]
    assert streams(three) == streams(one)


def hf_cfg(root: Path, out: Path, tok: Path) -> DataConfig:
    return make_cfg(root, out, tokenizer={"kind": "hf", "path": str(tok)}, sources=["a.txt", "b.jsonl", "c.txt"])


def test_a_changed_file_reruns_only_its_tasks(tmp_path):
    root = write_corpus(tmp_path / "root")
    tok = tmp_path / "tok.json"
    tiny_tokenizer(300).save(str(tok))
    logs: list[str] = []
    first = prepare_in_tasks(hf_cfg(root, tmp_path / "out", tok), 3, run_inline, log=logs.append)
    ran = []

    def counting(phase, ids, work):
        ran.extend(ids)
        run_inline(phase, ids, work)

    with open(root / "c.txt", "a") as fh:
        fh.write("one more paragraph about a garden\n<|endoftext|>\n")
    changed = prepare_in_tasks(hf_cfg(root, tmp_path / "out", tok), 3, counting, log=logs.append)
    # c.txt is the last file: the tasks that hold it, and only those, ran again
    holds_c = [t["id"] for t in changed.meta["tasks"] if any("c.txt" in i["path"] for i in t["inputs"])]
    assert sorted(ran) == holds_c and len(holds_c) < 3
    fresh = prepare(hf_cfg(root, tmp_path / "fresh", tok), log=lambda m: None)
    assert streams(changed) == streams(fresh) != streams(first)


def test_finished_tasks_are_kept_when_one_failed(tmp_path):
    root = write_corpus(tmp_path / "root")
    tok = tmp_path / "tok.json"
    tiny_tokenizer(300).save(str(tok))
    cfg = hf_cfg(root, tmp_path / "out", tok)

    def dies_on_1(phase, ids, work):
        run_inline(phase, [i for i in ids if i != 1], work)
        (work / "task-0001").mkdir(exist_ok=True)  # what a killed task leaves: a folder, no manifest
        (work / "task-0001" / "train_0000.bin").write_bytes(b"\0" * 10)

    from pretrain.errors import TasksFailed

    with pytest.raises(TasksFailed, match="task.s. 1 did not finish"):
        prepare_in_tasks(cfg, 3, dies_on_1, log=lambda m: None)
    ran: list[int] = []

    def counting(phase, ids, work):
        ran.extend(ids)
        run_inline(phase, ids, work)

    logs: list[str] = []
    data = prepare_in_tasks(cfg, 3, counting, log=logs.append)
    assert ran == [1] and any("2 done before (kept)" in m for m in logs)
    assert streams(data) == streams(prepare(hf_cfg(root, tmp_path / "one", tok), log=lambda m: None))
