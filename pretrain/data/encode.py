"""Parallel, ordered, bounded-memory encoding of a document stream.

Documents are cut into pieces of about `PIECE_CHARS` at *safe* points, where the tokens cannot
change: a newline between two non-whitespace characters. GPT-2's byte-level pre-tokenizer makes
that newline a token of its own whichever side of the cut it lands on, so the pieces' tokens,
concatenated, are exactly the document's tokens (tested). Tokenizers with any other pipeline
(normalizers, prefix spaces, ...) are encoded whole. Pieces are grouped into tasks of about
`TASK_CHARS` and encoded by a pool of worker processes (one thread each), a bounded number of
tasks ahead of the writer, and the results come back in input order. A corpus smaller than
`POOL_MIN_CHARS` is encoded in this process: starting workers would cost more than it saves.
"""
from __future__ import annotations

import json
import os
import re
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

import numpy as np

PIECE_CHARS = 1 << 16
TASK_CHARS = 1 << 20
POOL_MIN_CHARS = 8 << 20
_SAFE_CUT = re.compile(r"(?<=\S\n)(?=\S)")


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def chunk_safe(tok) -> bool:
    """True when cutting text at `_SAFE_CUT` points cannot change this tokenizer's output."""
    spec = json.loads(tok.to_str())
    pre, model = spec.get("pre_tokenizer") or {}, spec.get("model") or {}
    return (
        spec.get("normalizer") is None
        and pre.get("type") == "ByteLevel"
        and pre.get("use_regex", True)
        and not pre.get("add_prefix_space", False)
        and model.get("type") == "BPE"
        and not model.get("dropout")
        and all(t.get("special") for t in spec.get("added_tokens", []))
    )


def pieces(text: str, size: int = PIECE_CHARS) -> list[str]:
    """`text` cut at safe points into pieces of at least `size` characters (the last may be shorter)."""
    if len(text) <= size:
        return [text]
    out, start = [], 0
    while len(text) - start > size:
        m = _SAFE_CUT.search(text, start + size)
        if m is None:
            break
        out.append(text[start : m.start()])
        start = m.start()
    out.append(text[start:])
    return out


# ------------------------------------------------------------------------------- worker side
_TOK = None
_DTYPE = None


def _init_worker(tokenizer_json: str, dtype: str) -> None:
    global _TOK, _DTYPE
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per worker process
    from tokenizers import Tokenizer

    _TOK = Tokenizer.from_str(tokenizer_json)
    _TOK.encode_special_tokens = True
    _DTYPE = np.dtype(dtype)


def _encode_with(tok, dtype: np.dtype, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(all ids concatenated, ids per text)."""
    fast = getattr(tok, "encode_batch_fast", None)  # no offsets: faster (tokenizers >= 0.20)
    encs = fast(texts, add_special_tokens=False) if fast else tok.encode_batch(texts, add_special_tokens=False)
    arrays = [np.asarray(e.ids, dtype=dtype) for e in encs]
    lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
    return (np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)), lengths


def _encode_task(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    return _encode_with(_TOK, _DTYPE, texts)


# ------------------------------------------------------------------------------- main side
class Encoder:
    """`encode(items)`: (meta, text) pairs in, (meta, ids) pairs out, in the same order."""

    def __init__(self, tok, dtype: np.dtype, workers: int | None = None):
        self.tok, self.dtype = tok, np.dtype(dtype)
        self.workers = max(1, workers or available_cores())
        self.cut = chunk_safe(tok)
        self.pool_workers = 0  # set once a pool was started (for the record)

    def encode(self, items: Iterable[tuple[Any, str]]) -> Iterator[tuple[Any, np.ndarray]]:
        docs: deque[list] = deque()  # [meta, pieces left, parts] per document not yet returned
        tasks = self._tasks(items, docs)
        pool = None
        buffered: list[list[str]] = []
        chars = 0
        try:
            if self.workers > 1:
                for task in tasks:  # decide on a pool only once the corpus is known to be large
                    buffered.append(task)
                    chars += sum(map(len, task))
                    if chars >= POOL_MIN_CHARS:
                        pool = self._pool()
                        break
            if pool is None:
                for task in buffered or ():
                    yield from self._collect(docs, _encode_with(self.tok, self.dtype, task))
                for task in tasks:
                    yield from self._collect(docs, _encode_with(self.tok, self.dtype, task))
                return
            ahead: deque[Future] = deque(pool.submit(_encode_task, t) for t in buffered)
            buffered = []
            limit = 2 * self.workers + 1
            for task in tasks:
                while len(ahead) >= limit:
                    yield from self._collect(docs, ahead.popleft().result())
                ahead.append(pool.submit(_encode_task, task))
            while ahead:
                yield from self._collect(docs, ahead.popleft().result())
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    def _pool(self) -> ProcessPoolExecutor:
        self.pool_workers = self.workers
        # spawn: workers start clean (no copy of this process's memory, no forked tokenizer threads)
        return ProcessPoolExecutor(self.workers, mp_context=get_context("spawn"), initializer=_init_worker,
                                   initargs=(self.tok.to_str(), self.dtype.str))

    def _tasks(self, items: Iterable[tuple[Any, str]], docs: deque) -> Iterator[list[str]]:
        task: list[str] = []
        size = 0
        for meta, text in items:
            parts = pieces(text) if self.cut else [text]
            docs.append([meta, len(parts), []])
            for part in parts:
                task.append(part)
                size += len(part)
                if size >= TASK_CHARS:
                    yield task
                    task, size = [], 0
        if task:
            yield task

    @staticmethod
    def _collect(docs: deque, result: tuple[np.ndarray, np.ndarray]) -> Iterator[tuple[Any, np.ndarray]]:
        ids, lengths = result
        offset = 0
        for n in lengths.tolist():
            doc = docs[0]
            doc[2].append(ids[offset : offset + n])
            offset += n
            doc[1] -= 1
            if doc[1] == 0:
                docs.popleft()
                parts = doc[2]
                yield doc[0], parts[0] if len(parts) == 1 else np.concatenate(parts)
