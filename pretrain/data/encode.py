"""Parallel, ordered, bounded-memory encoding of a document stream.

Documents are cut into pieces of about `PIECE_CHARS` at *safe* points, where the tokens cannot
change: a newline between two non-whitespace characters. GPT-2's byte-level pre-tokenizer makes
that newline a token of its own whichever side of the cut it lands on, so the pieces' tokens,
concatenated, are exactly the document's tokens (tested). Tokenizers with any other pipeline
(normalizers, prefix spaces, ...) are encoded whole. Pieces are grouped into tasks of about
`TASK_CHARS` and encoded by worker processes (one thread each), at most two tasks per worker
ahead of the writer, and the results come back in input order. A corpus smaller than
`POOL_MIN_CHARS` is encoded in this process: starting workers would cost more than it saves.

The workers are plain `python -m pretrain.data.encode` processes fed length-prefixed pickles
over pipes (not `multiprocessing`: its spawn mode re-runs the caller's unguarded script in
every worker, and fork copies a process that may hold threads, e.g. a trainer's).
"""

from __future__ import annotations

import json
import os
import pickle
import re
import struct
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from queue import SimpleQueue
from typing import Any, BinaryIO

import numpy as np

from pretrain.errors import DataError

PIECE_CHARS = 1 << 16
TASK_CHARS = 1 << 20
POOL_MIN_CHARS = 8 << 20
_SAFE_CUT = re.compile(r"(?<=\S\n)(?=\S)")
_FRAME = struct.Struct("<Q")
PROJECT_ROOT = Path(__file__).resolve().parents[2]


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


# ------------------------------------------------------------------------------- both sides
def _send(fh: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(_FRAME.pack(len(data)) + data)
    fh.flush()


def _recv(fh: BinaryIO) -> Any:
    head = fh.read(_FRAME.size)
    if len(head) < _FRAME.size:
        raise EOFError
    size = _FRAME.unpack(head)[0]
    data = fh.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


def _encode_with(tok, dtype: np.dtype, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(all ids concatenated, ids per text)."""
    fast = getattr(tok, "encode_batch_fast", None)  # no offsets: faster (tokenizers >= 0.20)
    encs = fast(texts, add_special_tokens=False) if fast else tok.encode_batch(texts, add_special_tokens=False)
    arrays = [np.asarray(e.ids, dtype=dtype) for e in encs]
    lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
    return (np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)), lengths


def worker_main() -> None:
    """A worker: (tokenizer json, dtype), then task after task until None, on stdin; results on stdout."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per worker process
    from tokenizers import Tokenizer  # deferred: imports tokenizers

    inp = sys.stdin.buffer
    out = os.fdopen(os.dup(1), "wb")  # results go to a private copy of stdout...
    os.dup2(2, 1)  # ...and anything a library prints goes to stderr, never into the frames
    try:
        spec, dtype = _recv(inp)
        tok = Tokenizer.from_str(spec)
        tok.encode_special_tokens = True
        dtype = np.dtype(dtype)
        while (task := _recv(inp)) is not None:
            _send(out, _encode_with(tok, dtype, task))
    except EOFError:  # the parent went away
        pass


# ------------------------------------------------------------------------------- main side
class _Worker:
    def __init__(self, tokenizer_json: str, dtype: np.dtype):
        self.errors = tempfile.TemporaryFile()
        env = {
            **os.environ,
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pretrain.data.encode"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            env=env,
        )
        self.inbox: SimpleQueue = SimpleQueue()  # tasks for the feeder thread: the main thread never blocks writing
        self.feeder = threading.Thread(target=self._feed, daemon=True)
        self.feeder.start()
        self.inbox.put((tokenizer_json, dtype.str))

    def _feed(self) -> None:
        while True:
            item = self.inbox.get()
            try:
                _send(self.proc.stdin, item)
            except (BrokenPipeError, OSError, ValueError):
                return  # the worker died; the reader reports it
            if item is None:
                return

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        try:
            return _recv(self.proc.stdout)
        except EOFError:
            self.proc.wait()
            self.errors.seek(0)
            tail = self.errors.read().decode(errors="replace").strip().splitlines()[-5:]
            raise DataError(
                f"a tokenizer worker process failed (exit {self.proc.returncode}): " + " | ".join(tail)
            ) from None

    def close(self, kill: bool = False) -> None:
        if kill and self.proc.poll() is None:
            self.proc.kill()
        else:
            self.inbox.put(None)
        self.feeder.join(timeout=5)
        for fh in (self.proc.stdin, self.proc.stdout):
            try:
                fh.close()
            except OSError:
                pass
        self.proc.wait()
        self.errors.close()


class Encoder:
    """`encode(items)`: (meta, text) pairs in, (meta, ids) pairs out, in the same order."""

    def __init__(self, tok, dtype: np.dtype, workers: int | None = None):
        self.tok, self.dtype = tok, np.dtype(dtype)
        self.workers = max(1, workers or available_cores())
        self.cut = chunk_safe(tok)
        self.pool_workers = 0  # set once worker processes were started (for the record)

    def encode(self, items: Iterable[tuple[Any, str]]) -> Iterator[tuple[Any, np.ndarray]]:
        docs: deque[list] = deque()  # [meta, pieces left, parts] per document not yet returned
        tasks = self._tasks(items, docs)
        buffered: list[list[str]] = []
        chars = 0
        if self.workers > 1:
            for task in tasks:  # decide on workers only once the corpus is known to be large
                buffered.append(task)
                chars += sum(map(len, task))
                if chars >= POOL_MIN_CHARS:
                    break
        if chars < POOL_MIN_CHARS:
            for task in buffered:
                yield from self._collect(docs, _encode_with(self.tok, self.dtype, task))
            for task in tasks:
                yield from self._collect(docs, _encode_with(self.tok, self.dtype, task))
            return
        spec = self.tok.to_str()
        pool = [_Worker(spec, self.dtype) for _ in range(self.workers)]
        self.pool_workers = len(pool)
        ok = False
        try:
            ahead: deque[_Worker] = deque()  # the worker of each task in flight, oldest first
            n = 0

            def submit(task: list[str]) -> None:
                nonlocal n
                w = pool[n % len(pool)]
                n += 1
                w.inbox.put(task)
                ahead.append(w)

            for task in buffered:
                while len(ahead) >= 2 * len(pool):
                    yield from self._collect(docs, ahead.popleft().result())
                submit(task)
            buffered = []
            for task in tasks:
                while len(ahead) >= 2 * len(pool):
                    yield from self._collect(docs, ahead.popleft().result())
                submit(task)
            while ahead:
                yield from self._collect(docs, ahead.popleft().result())
            ok = True
        finally:
            for w in pool:
                w.close(kill=not ok)

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


if __name__ == "__main__":
    worker_main()
