"""`prepare`: sources -> documents -> split -> tokenizer -> token shards + meta.json, cached.

Two streaming passes over the corpus: one draws the tokenizer's training sample (kind=bpe
only), the other splits each document as it passes (seeded content hash, or `val_sources`),
encodes it in parallel and appends it to its split's shards, so memory stays flat in corpus size.

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
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import tokenizers

from pretrain.data.config import DataConfig
from pretrain.data.encode import Encoder, pieces
from pretrain.data.fingerprint import explain_change, fingerprint, fingerprint_inputs
from pretrain.data.prepared import FORMAT_VERSION, META_FILE, TOKENIZER_FILE, PreparedData, load_prepared
from pretrain.data.sample import DocumentSample
from pretrain.data.shards import ShardWriter, token_dtype
from pretrain.data.sources import data_root, iter_documents, resolve_sources
from pretrain.data.split import SPLITS, SplitPlan, StreamSplit, doc_hash, doc_key
from pretrain.data.tokenizer import build_tokenizer, settings_fingerprint
from pretrain.errors import DataError

__all__ = ["prepare", "load_prepared", "PreparedData", "output_dir"]

Log = Callable[[str], None]
PROGRESS_S = 15.0  # seconds between progress lines while encoding


def output_dir(cfg: DataConfig) -> Path:
    """data.out_dir, else data/<name>, relative to the working directory."""
    return Path(cfg.out_dir or Path("data") / cfg.name).expanduser().resolve()


def _resolve(data_cfg: DataConfig):
    """(sources, val_sources, fingerprint inputs, key): resolves and hashes every input, writes nothing."""
    if data_cfg.mixture is not None:
        raise DataError(
            f"data '{data_cfg.name}' is a mixture of prepared data sets ({', '.join(data_cfg.mixture)}): "
            "prepare its components (`scalelab data prepare <component>`); training prepares them itself"
        )
    sources = resolve_sources(data_cfg)  # fails fast (missing root/file, empty glob) before writing
    val_sources = resolve_sources(data_cfg, "val_sources") if data_cfg.val_sources is not None else None
    root = data_root(data_cfg).path
    inputs = fingerprint_inputs(data_cfg, sources, root, settings_fingerprint(data_cfg.tokenizer, root), val_sources)
    return sources, val_sources, inputs, fingerprint(inputs)


def prepared_state(data_cfg: DataConfig) -> tuple[bool, str]:
    """(up to date, reason): whether `prepare` would reuse the output as it is, without building anything.

    Sweeps use it to prepare each data set once, as its own job, before the runs that need it."""
    out_dir = output_dir(data_cfg)
    _, _, inputs, key = _resolve(data_cfg)
    if _reusable(out_dir, key) is not None:
        return True, "up to date"
    return False, _why_rebuild(out_dir, inputs)


def prepare(data_cfg: DataConfig, log: Log = print, force: bool = False) -> PreparedData:
    """Build the prepared data set, or reuse it when its fingerprint matches the inputs."""
    out_dir = output_dir(data_cfg)
    sources, val_sources, inputs, key = _resolve(data_cfg)

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
            _build(tmp, data_cfg, sources, inputs, key, log, val_sources)
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
            raise DataError(
                f"output folder {out_dir} exists and is not a prepared data folder (no {META_FILE}); "
                "refusing to replace it: choose another data.out_dir / --out"
            )
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
# The build itself


def _source_names(sources) -> str:
    return ", ".join(s.config.path or s.config.hf_dataset or "?" for s in sources)


def _build(tmp: Path, cfg: DataConfig, sources, inputs: dict, key: str, log: Log, val_sources=None) -> None:
    given = val_sources is not None
    rule = StreamSplit(cfg.val_fraction, cfg.seed)
    tcfg = cfg.tokenizer
    sample_info = None
    train_texts = None
    t0 = time.perf_counter()
    if tcfg.kind == "bpe":
        sample, tally = _sample_pass(cfg, sources, rule, given)
        if not given and tally.degenerate():
            rule = StreamSplit(cfg.val_fraction, cfg.seed, _fallback_plan(cfg, sources))
            sample, tally = _sample_pass(cfg, sources, rule, given)
        if tally.documents == 0:
            raise DataError(f"empty corpus: the sources ({_source_names(sources)}) hold no text documents")
        texts = sample.texts()
        sample_info = {
            "documents": len(texts),
            "chars": sample.chars,
            "train_documents": tally.train,
            "train_chars": sample.seen_chars,
            "sample_chars": tcfg.sample_chars,
        }
        whole = (
            "the whole train split"
            if len(texts) == tally.train
            else f"a seeded sample of {len(texts)} of {tally.train} train documents"
        )
        log(
            f"training byte-level BPE (vocab {tcfg.vocab_size}) on {whole} ({sample.chars:,} characters; "
            f"sampled in {time.perf_counter() - t0:.1f}s)"
        )
        t0 = time.perf_counter()
        train_texts = (p for t in texts for p in pieces(t))  # safe cuts: the same words, smaller sequences
    tok, eot = build_tokenizer(tcfg, data_root(cfg).path, train_texts, log)
    train_texts = texts = sample = None  # the sample is no longer needed
    if tcfg.kind == "bpe":
        log(f"  BPE trained in {time.perf_counter() - t0:.1f}s")
    vocab = tok.get_vocab_size(with_added_tokens=True)
    if tcfg.kind == "bpe" and vocab < tcfg.vocab_size:
        log(f"note: the corpus supports only {vocab} BPE tokens (asked for {tcfg.vocab_size})")
    tok.save(str(tmp / TOKENIZER_FILE))
    dtype = token_dtype(vocab)
    # Text that spells "<|endoftext|>" is encoded as plain text: only real boundaries get eot_id.
    tok.encode_special_tokens = True

    encoder = Encoder(tok, dtype, cfg.workers)
    log(
        f"encoding with {tcfg.kind} tokenizer (vocab {vocab}, {dtype.name}; "
        f"up to {encoder.workers} worker process{'es' if encoder.workers > 1 else ''})"
    )
    out = _encode_pass(tmp, cfg, sources, val_sources, rule, encoder, eot, dtype, log)
    if not given and out.tally.degenerate():  # only when no sample pass ran (kind hf/gpt2)
        for w in out.writers.values():
            w.remove()
        rule = StreamSplit(cfg.val_fraction, cfg.seed, _fallback_plan(cfg, sources))
        out = _encode_pass(tmp, cfg, sources, val_sources, rule, encoder, eot, dtype, log)
    if out.tally.documents == 0:
        raise DataError(f"empty corpus: the sources ({_source_names(sources)}) hold no text documents")
    if given:
        if out.stats["train"]["documents"] == 0:
            raise DataError(f"empty train split: data.sources ({_source_names(sources)}) hold no text documents")
        if out.stats["val"]["documents"] == 0:
            raise DataError(
                f"empty validation split: data.val_sources ({_source_names(val_sources)}) hold no text documents"
            )

    splits = {}
    for s in SPLITS:
        w = out.writers[s]
        unique, dups = out.unique(s)
        splits[s] = split_entry(out.stats[s], w.tokens, unique, dups, w.sha256, w.shards, log, s)
    tok_meta = tokenizer_meta(tmp, tok, eot, vocab, tcfg.kind, inputs, sample_info)
    meta = assemble_meta(
        cfg,
        key,
        inputs,
        tok_meta,
        dtype,
        given,
        rule.plan is not None,
        splits,
        (sources, out.per_source),
        (val_sources, out.per_val_source),
        encoder.pool_workers or 1,
    )
    meta["tasks"] = [
        {
            "id": 0,
            "inputs": [f for s in [*sources, *(val_sources or [])] for f in s.describe().get("files", [s.describe()])],
            "tokens": sum(w.tokens for w in out.writers.values()),
            "sha256": out.stream.hexdigest(),
            "done": True,
        }
    ]
    _write_json(tmp / META_FILE, meta)


def split_entry(stats: dict, tokens: int, unique: int, dups: int, sha: str, shards: list, log: Log, name: str) -> dict:
    """A split's meta.json entry (and its log line)."""
    entry = {**stats, "tokens": tokens, "unique_tokens": unique, "duplicate_documents": dups, "sha256": sha}
    entry["shards"] = shards
    extra = f", {dups} duplicate documents ({unique:,} unique tokens)" if dups else ""
    log(f"  {name}: {entry['documents']} docs, {tokens:,} tokens, {entry['bytes']:,} bytes{extra}")
    return entry


def tokenizer_meta(folder: Path, tok, eot: int, vocab: int, kind: str, inputs: dict, sample_info: dict | None) -> dict:
    meta = {
        "kind": kind,
        "file": TOKENIZER_FILE,
        "sha256": _sha256(folder / TOKENIZER_FILE),
        "vocab_size": vocab,
        "eot_id": eot,
        "eot_token": tok.id_to_token(eot),
        "settings": inputs["tokenizer"],
        "tokenizers_version": tokenizers.__version__,
    }
    if sample_info is not None:
        meta["sample"] = sample_info
    return meta


def assemble_meta(
    cfg: DataConfig,
    key: str,
    inputs: dict,
    tok_meta: dict,
    dtype,
    given: bool,
    forced: bool,
    splits: dict,
    sources: tuple,
    val_sources: tuple,
    encode_workers: int,
) -> dict:
    """meta.json of a prepared folder: the same keys whether it was built in one task or in K."""
    (srcs, per_source), (vals, per_val) = sources, val_sources
    vocab, eot = tok_meta["vocab_size"], tok_meta["eot_id"]
    meta = {
        "format": FORMAT_VERSION,
        "name": cfg.name,
        "fingerprint": key,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "vocab_size": vocab,
        "eot_id": eot,
        "dtype": np.dtype(dtype).name,
        "layout": "each document is preceded by eot_id; shards are raw little-endian arrays",
        "tokenizer": tok_meta,
        "split": (
            {"kind": "given", "val_sources": len(vals)}
            if given
            else {"kind": "hashed", "val_fraction": cfg.val_fraction, "seed": cfg.seed, "forced": forced}
        ),
        "splits": splits,
        "sources": [{**s.describe(), "documents": n} for s, n in zip(srcs, per_source)],
        "encode_workers": encode_workers,
        "config": cfg.model_dump(mode="json"),
        "fingerprint_inputs": inputs,
    }
    if given:
        meta["val_sources"] = [{**s.describe(), "documents": n} for s, n in zip(vals, per_val)]
    return meta


class _Tally:
    def __init__(self) -> None:
        self.train = self.val = 0

    @property
    def documents(self) -> int:
        return self.train + self.val

    def add(self, split: str) -> None:
        if split == "train":
            self.train += 1
        else:
            self.val += 1

    def degenerate(self) -> bool:
        """A hashed split that left one side empty (tiny corpora): SplitPlan's guarantees are needed."""
        return self.documents > 0 and (self.train == 0 or self.val == 0)


def _fallback_plan(cfg: DataConfig, sources) -> SplitPlan:
    """The split of a corpus too small for the hash alone (one more pass over a few documents)."""
    return SplitPlan(
        np.fromiter((doc_hash(d.text, cfg.seed) for d in iter_documents(cfg, sources)), dtype=np.float64),
        cfg.val_fraction,
    )


def _sample_pass(cfg: DataConfig, sources, rule: StreamSplit, given: bool) -> tuple[DocumentSample, _Tally]:
    sample, tally = DocumentSample(cfg.tokenizer.sample_chars, cfg.seed), _Tally()
    for pos, doc in enumerate(iter_documents(cfg, sources)):
        split = "train" if given else rule.of(pos, doc_key(doc.text, cfg.seed))
        tally.add(split)
        if split == "train":
            sample.offer(doc.text)
    return sample, tally


class _Encoded:
    """What the encoding pass wrote: shard writers, counts, and the (key, tokens) of every document."""

    def __init__(self, tmp: Path, cfg: DataConfig, dtype, n_sources: int, n_val_sources: int):
        self.writers = {s: ShardWriter(tmp, s, dtype, cfg.shard_tokens) for s in SPLITS}
        self.stats = {s: {"documents": 0, "bytes": 0, "chars": 0} for s in SPLITS}
        self.per_source = [0] * n_sources
        self.per_val_source = [0] * n_val_sources
        self.tally = _Tally()
        self._keys = {s: [] for s in SPLITS}  # 8 + 8 bytes per document, for the unique-token count
        self._lengths = {s: [] for s in SPLITS}
        self.stream = hashlib.sha256()  # the one task's stream: both splits, in document order

    def record(self, split: str, key: int, tokens: int) -> None:
        self._keys[split].append(key)
        self._lengths[split].append(tokens)

    def unique(self, split: str) -> tuple[int, int]:
        """(tokens counting each distinct document once, number of repeated documents)."""
        keys = np.array(self._keys[split], dtype=np.uint64)
        lengths = np.array(self._lengths[split], dtype=np.int64)
        if not len(keys):
            return 0, 0
        _, first = np.unique(keys, return_index=True)
        return int(lengths[first].sum()), int(len(keys) - len(first))


def _encode_pass(
    tmp: Path, cfg: DataConfig, sources, val_sources, rule: StreamSplit, encoder: Encoder, eot: int, dtype, log: Log
) -> _Encoded:
    out = _Encoded(tmp, cfg, dtype, len(sources), len(val_sources or []))

    def items():
        for pos, doc in enumerate(iter_documents(cfg, sources)):
            key = doc_key(doc.text, cfg.seed)
            split = "train" if val_sources is not None else rule.of(pos, key)
            yield (split, key, doc.source, len(doc.text), len(doc.text.encode("utf-8"))), doc.text
        for doc in iter_documents(cfg, val_sources or []):
            yield (
                ("val", doc_key(doc.text, cfg.seed), -1 - doc.source, len(doc.text), len(doc.text.encode("utf-8"))),
                doc.text,
            )

    start = last = time.perf_counter()
    done_bytes = 0
    for (split, key, source, chars, nbytes), ids in encoder.encode(items()):
        doc = np.empty(len(ids) + 1, dtype=dtype)
        doc[0] = eot  # every document starts after end-of-text, as evaluation's BOS does
        doc[1:] = ids
        out.writers[split].write(doc)
        out.stream.update(doc.tobytes())
        st = out.stats[split]
        st["documents"] += 1
        st["chars"] += chars
        st["bytes"] += nbytes
        out.tally.add(split)
        out.record(split, key, len(doc))
        if source >= 0:
            out.per_source[source] += 1
        else:
            out.per_val_source[-1 - source] += 1
        done_bytes += nbytes
        now = time.perf_counter()
        if now - last > PROGRESS_S:
            last = now
            log(
                f"  encoded {done_bytes / 1e6:,.0f} MB of text, {out.tally.documents:,} documents "
                f"({done_bytes / 1e6 / (now - start):.1f} MB/s)"
            )
    for w in out.writers.values():
        w.close()
    took = time.perf_counter() - start
    log(f"  encoded {done_bytes / 1e6:,.1f} MB of text in {took:.1f}s ({done_bytes / 1e6 / max(took, 1e-9):.1f} MB/s)")
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
