"""Token shards: flat little-endian uint16/uint32 files read back with `np.memmap`.

Raw arrays (no header) so any tool can read them given the dtype in meta.json, and so the
trainer can index a multi-GB split without loading it. A split is cut into several shards only
past `data.shard_tokens`, always at a document boundary.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from pretrain.errors import DataError


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (vocab <= 65536), else uint32."""
    return np.dtype("<u2") if vocab_size <= 2**16 else np.dtype("<u4")


class ShardWriter:
    """Appends documents' token arrays to `<split>_<k>.bin`, starting a new shard when full."""

    def __init__(self, folder: Path, split: str, dtype: np.dtype, shard_tokens: int):
        self.folder, self.split, self.dtype, self.shard_tokens = folder, split, dtype, shard_tokens
        self.shards: list[dict] = []
        self._fh = None
        self._sha = hashlib.sha256()  # of the whole split's token stream, whatever its shards

    def _open_next(self) -> None:
        self.close()
        name = f"{self.split}_{len(self.shards):04d}.bin"
        self._fh = open(self.folder / name, "wb")
        self.shards.append({"file": name, "tokens": 0})

    def write(self, ids: np.ndarray) -> None:
        """One whole document (its leading end-of-text included)."""
        if self._fh is None or (self.shards[-1]["tokens"] and self.shards[-1]["tokens"] + len(ids) > self.shard_tokens):
            self._open_next()
        data = ids.astype(self.dtype, copy=False).tobytes()
        self._fh.write(data)
        self._sha.update(data)
        self.shards[-1]["tokens"] += len(ids)

    @property
    def sha256(self) -> str:
        return self._sha.hexdigest()

    def remove(self) -> None:
        """Delete what was written (a rebuild of the split starts over)."""
        self.close()
        for shard in self.shards:
            (self.folder / shard["file"]).unlink(missing_ok=True)
        self.shards, self._sha = [], hashlib.sha256()

    @property
    def tokens(self) -> int:
        return sum(s["tokens"] for s in self.shards)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None


def open_shards(folder: Path, shards: list[dict], dtype: np.dtype) -> list[np.memmap]:
    """Memmap each shard read-only, checking its size against meta.json (catches truncation)."""
    arrays = []
    for shard in shards:
        path = folder / shard["file"]
        expected = shard["tokens"] * dtype.itemsize
        if not path.is_file() or path.stat().st_size != expected:
            size = path.stat().st_size if path.is_file() else "missing"
            raise DataError(f"{path}: expected {expected} bytes, found {size}; rerun `scalelab data prepare --force`")
        if shard["tokens"] == 0:
            arrays.append(np.zeros(0, dtype=dtype))
        else:
            arrays.append(np.memmap(path, dtype=dtype, mode="r", shape=(shard["tokens"],)))
    return arrays
