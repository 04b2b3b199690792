"""Document-level train/validation split.

A document goes to validation when a seeded hash of its *content* falls below `val_fraction`.
Hashing content (not position) keeps every assignment stable when other files are added,
removed or edited, and puts exact duplicates on the same side, so validation text never
appears verbatim in training. The decision is made per document as it streams past; only a
corpus so small that one side would stay empty needs the whole list (`SplitPlan`).
When `data.val_sources` is given, the split is given too and nothing is hashed for it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

from pretrain.errors import DataError

SPLITS = ("train", "val")


def doc_key(text: str, seed: int | str) -> int:
    """A 64-bit seeded hash of the text: the split, the tokenizer sample and duplicate counting use it."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8, key=str(seed).encode()).digest()
    return int.from_bytes(digest, "big")


def doc_hash(text: str, seed: int) -> float:
    """Uniform in [0, 1), a deterministic function of (seed, text)."""
    return doc_key(text, seed) / 2.0**64


def hashed_split(key: int, val_fraction: float) -> str:
    """The split of a document with `doc_key` `key` (before SplitPlan's guarantees)."""
    return "val" if key / 2.0**64 < val_fraction else "train"


class SplitPlan:
    """Which documents (by position in the document stream) are validation documents.

    Built from one pass over the hashes so that the guarantees (at least one document on
    each side) can be enforced before the tokenizer sees any text.
    """

    def __init__(self, hashes: Iterable[float], val_fraction: float):
        h = np.asarray(hashes if isinstance(hashes, np.ndarray) else list(hashes), dtype=np.float64)
        if len(h) < 2:
            raise DataError(
                f"the corpus has {len(h)} document(s); at least 2 are needed to hold out a validation "
                "document (add text, or lower data.doc_chars to cut files into more documents)"
            )
        self.val = set(np.flatnonzero(h < val_fraction).tolist())
        if not self.val:  # tiny corpus: hold out the document closest to the threshold
            self.val = {int(np.argmin(h))}
        if len(self.val) == len(h):
            self.val.discard(int(np.argmax(h)))
        self.n_docs = len(h)

    def split_of(self, position: int) -> str:
        return "val" if position in self.val else "train"


class StreamSplit:
    """The split of each document as the corpus streams past: its hash, or a `SplitPlan` by position."""

    def __init__(self, val_fraction: float, seed: int, plan: SplitPlan | None = None):
        self.val_fraction, self.seed, self.plan = val_fraction, seed, plan

    def of(self, position: int, key: int) -> str:
        return self.plan.split_of(position) if self.plan is not None else hashed_split(key, self.val_fraction)
