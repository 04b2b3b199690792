"""`prepare`: sources -> documents -> split -> tokenizer -> token shards + meta.json, cached.

The output folder is built in a hidden temporary sibling and renamed into place only when
complete, so a killed prepare never leaves a folder that looks valid. A file lock serialises
concurrent prepares of the same folder (e.g. every rank of a multi-process job calling it):
the first builds, the others then find a valid cache and reuse it.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import tokenizers

from pretrain.data.config import DataConfig
from pretrain.data.fingerprint import explain_change, fingerprint, fingerprint_inputs
from pretrain.data.prepared import FORMAT_VERSION, META_FILE, TOKENIZER_FILE, PreparedData, load_prepared
from pretrain.data.shards import ShardWriter, token_dtype
from pretrain.data.sources import Document, data_root, iter_documents, resolve_sources
from pretrain.data.split import SPLITS, SplitPlan, doc_hash
from pretrain.data.tokenizer import build_tokenizer, settings_fingerprint
from pretrain.errors import DataError

__all__ = ["prepare", "load_prepared", "PreparedData", "output_dir"]

Log = Callable[[str], None]
ENCODE_BATCH_CHARS = 4_000_000  # texts per encode_batch call: enough to keep every core busy


def output_dir(cfg: DataConfig) -> Path:
    """data.out_dir, else data/<name>, relative to the working directory."""
    return Path(cfg.out_dir or Path("data") / cfg.name).expanduser().resolve()


def prepare(data_cfg: DataConfig, log: Log = print, force: bool = False) -> PreparedData:
    """Build the prepared data set, or reuse it when its fingerprint matches the inputs."""
    out_dir = output_dir(data_cfg)
    sources = resolve_sources(data_cfg)  # fails fast (missing root/file, empty glob) before writing
    root = data_root(data_cfg).path
    inputs = fingerprint_inputs(data_cfg, sources, root, settings_fingerprint(data_cfg.tokenizer, root))
    key = fingerprint(inputs)

    if not force and (cached := _reusable(out_dir, key)) is not None:
        log(f"reusing prepared data in {out_dir} (fingerprint {key[:12]}, inputs unchanged)")
        return cached

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with _lock(out_dir, log):
        if not force and (cached := _reusable(out_dir, key)) is not None:  # built while we waited
            log(f"reusing prepared data in {out_dir} (built by another process)")
            return cached
        reason = "forced (--force)" if force else _why_rebuild(out_dir, inputs)
        log(f"building {out_dir}: {reason}")
        _remove_leftovers(out_dir)
        start = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; others on a cluster read it
        try:
            _build(tmp, data_cfg, sources, inputs, key, log)
            meta_path = tmp / META_FILE
            meta = json.loads(meta_path.read_text())
            meta["build_seconds"] = round(time.perf_counter() - start, 3)
            _write_json(meta_path, meta)
            _swap_into_place(tmp, out_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    prepared = load_prepared(out_dir)
    prepared.reason = reason
    log(f"built {out_dir} in {prepared.meta['build_seconds']:.1f}s")
    return prepared


# ---------------------------------------------------------------------------------------------
# Cache checks and atomic replacement


def _reusable(out_dir: Path, key: str) -> PreparedData | None:
    if not (out_dir / META_FILE).is_file():
        return None
    try:
        data = load_prepared(out_dir)
    except DataError:
        return None
    if data.fingerprint != key:
        return None
    data.reused, data.reason = True, "up to date"
    return data


def _why_rebuild(out_dir: Path, inputs: dict) -> str:
    meta_path = out_dir / META_FILE
    if not out_dir.exists():
        return "no prepared data yet"
    if not meta_path.is_file():
        if any(out_dir.iterdir()):
            raise DataError(f"output folder {out_dir} exists and is not a prepared data folder (no {META_FILE}); "
                            "refusing to replace it: choose another data.out_dir / --out")
        return "output folder is empty"
    try:
        load_prepared(out_dir)
    except DataError as exc:
        return f"existing data is incomplete or corrupt ({exc})"
    old = json.loads(meta_path.read_text()).get("fingerprint_inputs")
    return explain_change(old, inputs)


@contextmanager
def _lock(out_dir: Path, log: Log) -> Iterator[None]:
    path = out_dir.parent / f".{out_dir.name}.lock"
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another prepare of {out_dir} to finish")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _remove_leftovers(out_dir: Path) -> None:
    """Temporary folders of killed prepares (safe: we hold the lock)."""
    for pattern in (f".{out_dir.name}.tmp-*", f".{out_dir.name}.old-*"):
        for path in out_dir.parent.glob(pattern):
            shutil.rmtree(path, ignore_errors=True)


def _swap_into_place(tmp: Path, out_dir: Path) -> None:
    old = None
    if out_dir.exists():
        old = out_dir.parent / f".{out_dir.name}.old-{uuid.uuid4().hex[:8]}"
        os.rename(out_dir, old)
    os.rename(tmp, out_dir)
    _fsync_dir(out_dir.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json(path: Path, obj: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w") as fh:
        json.dump(obj, fh, indent=2)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# The build itself (three passes over the documents: split, tokenizer training, encoding)


def _build(tmp: Path, cfg: DataConfig, sources, inputs: dict, key: str, log: Log) -> None:
    def docs() -> Iterator[Document]:
        return iter_documents(cfg, sources)

    hashes = np.fromiter((doc_hash(d.text, cfg.seed) for d in docs()), dtype=np.float64)
    if not len(hashes):
        names = ", ".join(s.config.path or s.config.hf_dataset or "?" for s in sources)
        raise DataError(f"empty corpus: the sources ({names}) hold no text documents")
    plan = SplitPlan(hashes, cfg.val_fraction)
    log(f"{plan.n_docs} documents: {plan.n_docs - len(plan.val)} train, {len(plan.val)} val (seed {cfg.seed})")

    tcfg = cfg.tokenizer
    if tcfg.kind == "bpe":
        log(f"training byte-level BPE (vocab {tcfg.vocab_size}) on the train split")
    train_texts = _capped((d.text for i, d in enumerate(docs()) if plan.split_of(i) == "train"), tcfg.train_max_chars, log)
    tok, eot = build_tokenizer(tcfg, data_root(cfg).path, train_texts if tcfg.kind == "bpe" else None, log)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    if tcfg.kind == "bpe" and vocab < tcfg.vocab_size:
        log(f"note: the corpus supports only {vocab} BPE tokens (asked for {tcfg.vocab_size})")
    tok.save(str(tmp / TOKENIZER_FILE))
    dtype = token_dtype(vocab)
    # Text that spells "<|endoftext|>" is encoded as plain text: only real boundaries get eot_id.
    tok.encode_special_tokens = True

    log(f"encoding with {tcfg.kind} tokenizer (vocab {vocab}, {dtype.name})")
    writers = {s: ShardWriter(tmp, s, dtype, cfg.shard_tokens) for s in SPLITS}
    stats = {s: {"documents": 0, "bytes": 0, "chars": 0} for s in SPLITS}
    per_source = [{"documents": 0} for _ in sources]
    batch: list[tuple[int, Document]] = []

    def flush() -> None:
        encodings = tok.encode_batch([d.text for _, d in batch], add_special_tokens=False)
        for (pos, doc), enc in zip(batch, encodings):
            split = plan.split_of(pos)
            ids = np.empty(len(enc.ids) + 1, dtype=np.int64)
            ids[0] = eot  # every document starts after end-of-text, as evaluation's BOS does
            ids[1:] = enc.ids
            writers[split].write(ids)
            st = stats[split]
            st["documents"] += 1
            st["chars"] += len(doc.text)
            st["bytes"] += len(doc.text.encode("utf-8"))
            per_source[doc.source]["documents"] += 1
        batch.clear()

    chars = 0
    for pos, doc in enumerate(docs()):
        batch.append((pos, doc))
        chars += len(doc.text)
        if chars >= ENCODE_BATCH_CHARS:
            flush()
            chars = 0
    if batch:
        flush()
    for w in writers.values():
        w.close()

    splits = {s: {**stats[s], "tokens": writers[s].tokens, "shards": writers[s].shards} for s in SPLITS}
    for s in SPLITS:
        log(f"  {s}: {splits[s]['documents']} docs, {splits[s]['tokens']:,} tokens, {splits[s]['bytes']:,} bytes")
    meta = {
        "format": FORMAT_VERSION,
        "name": cfg.name,
        "fingerprint": key,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "vocab_size": vocab,
        "eot_id": eot,
        "dtype": dtype.name,
        "layout": "each document is preceded by eot_id; shards are raw little-endian arrays",
        "tokenizer": {
            "kind": tcfg.kind,
            "file": TOKENIZER_FILE,
            "sha256": _sha256(tmp / TOKENIZER_FILE),
            "vocab_size": vocab,
            "eot_id": eot,
            "eot_token": tok.id_to_token(eot),
            "settings": inputs["tokenizer"],
            "tokenizers_version": tokenizers.__version__,
        },
        "splits": splits,
        "sources": [{**s.describe(), "documents": n["documents"]} for s, n in zip(sources, per_source)],
        "config": cfg.model_dump(mode="json"),
        "fingerprint_inputs": inputs,
    }
    _write_json(tmp / META_FILE, meta)


def _capped(texts: Iterator[str], max_chars: int, log: Log) -> Iterator[str]:
    """Stop once `max_chars` characters were yielded (the BPE needs a sample, not the whole corpus)."""
    seen = 0
    for text in texts:
        if seen >= max_chars:
            log(f"BPE trained on the first {seen:,} characters of the train split (tokenizer.train_max_chars)")
            return
        seen += len(text)
        yield text


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
