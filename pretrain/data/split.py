"""Document-level train/validation split.

A document goes to validation when a seeded hash of its *content* falls below `val_fraction`.
Hashing content (not position) keeps every assignment stable when other files are added,
removed or edited, and puts exact duplicates on the same side, so validation text never
appears verbatim in training.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable

from pretrain.errors import DataError

SPLITS = ("train", "val")


def doc_hash(text: str, seed: int) -> float:
    """Uniform in [0, 1), a deterministic function of (seed, text)."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8, key=str(seed).encode()).digest()
    return int.from_bytes(digest, "big") / 2.0**64


class SplitPlan:
    """Which documents (by position in the document stream) are validation documents.

    Built from one pass over the hashes so that the guarantees (at least one document on
    each side) can be enforced before the tokenizer sees any text.
    """

    def __init__(self, hashes: Iterable[float], val_fraction: float):
        hashes = list(hashes)
        if len(hashes) < 2:
            raise DataError(
                f"the corpus has {len(hashes)} document(s); at least 2 are needed to hold out a validation "
                "document (add text, or lower data.doc_chars to cut files into more documents)"
            )
        self.val = {i for i, h in enumerate(hashes) if h < val_fraction}
        if not self.val:  # tiny corpus: hold out the document closest to the threshold
            self.val = {min(range(len(hashes)), key=hashes.__getitem__)}
        if len(self.val) == len(hashes):
            self.val.discard(max(range(len(hashes)), key=hashes.__getitem__))
        self.n_docs = len(hashes)

    def split_of(self, position: int) -> str:
        return "val" if position in self.val else "train"
