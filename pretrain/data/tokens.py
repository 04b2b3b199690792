"""A split's shards read as one token stream, without concatenating them.

`TokenStream` indexes the memory-mapped shards of a split as if they were one array: `len()`,
integer and slice reads (a slice may straddle shard boundaries), a batch of windows at once
(`windows`) and `np.asarray()` (which does materialise everything: meant for tests and small
splits). The trainer's windows and held-out evaluation read through it, so no rank ever holds a
split in memory.
"""

from __future__ import annotations

import numpy as np


class TokenStream:
    def __init__(self, shards: list[np.ndarray]):
        self.shards = [s for s in shards if len(s)]
        self.dtype = np.dtype(shards[0].dtype) if shards else np.dtype("<u2")
        self.ends = np.cumsum([len(s) for s in self.shards], dtype=np.int64)
        self.starts = self.ends - np.array([len(s) for s in self.shards], dtype=np.int64)
        self._len = int(self.ends[-1]) if len(self.ends) else 0

    def __len__(self) -> int:
        return self._len

    @property
    def ndim(self) -> int:
        return 1

    @property
    def shape(self) -> tuple[int]:
        return (self._len,)

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens [start, stop) as a new array (clipped to the stream like a slice)."""
        start, stop = max(0, start), min(stop, self._len)
        if stop <= start:
            return np.zeros(0, dtype=self.dtype)
        first = int(np.searchsorted(self.ends, start, side="right"))
        local = start - int(self.starts[first])
        shard = self.shards[first]
        if local + (stop - start) <= len(shard):  # the usual case: inside one shard
            return np.array(shard[local : local + stop - start])
        out = np.empty(stop - start, dtype=self.dtype)
        pos, i = 0, first
        while pos < len(out):
            shard = self.shards[i]
            take = min(len(shard) - local, len(out) - pos)
            out[pos : pos + take] = shard[local : local + take]
            pos, local, i = pos + take, 0, i + 1
        return out

    def windows(self, starts: np.ndarray, length: int) -> np.ndarray:
        """(len(starts), length): the tokens [s, s + length) for each start, as a new array (the
        sampler's batches). Windows inside one shard are gathered by one indexing op per shard;
        the rare window that straddles a shard boundary is read on its own."""
        starts = np.asarray(starts, dtype=np.int64)
        if starts.size and (starts.min() < 0 or starts.max() + length > self._len):
            raise IndexError(f"windows of {length} tokens out of range for a stream of {self._len}")
        out = np.empty((len(starts), length), dtype=self.dtype)
        shard = np.searchsorted(self.ends, starts, side="right")  # < len(shards): every start is in range
        local = starts - self.starts[shard]
        inside = starts + length <= self.ends[shard]
        for i in np.unique(shard[inside]):
            sel = inside & (shard == i)
            out[sel] = np.lib.stride_tricks.sliding_window_view(self.shards[i], length)[local[sel]]
        for r in np.flatnonzero(~inside):
            out[r] = self.read(int(starts[r]), int(starts[r]) + length)
        return out

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.indices(self._len)
            if step < 0:
                raise ValueError("TokenStream slices read forwards (step > 0)")
            data = self.read(start, stop)
            return data if step == 1 else data[::step]
        if isinstance(key, (int, np.integer)):
            i = int(key) + (self._len if key < 0 else 0)
            if not 0 <= i < self._len:
                raise IndexError(f"token index {key} out of range for a stream of {self._len}")
            return self.read(i, i + 1)[0]
        raise TypeError(f"TokenStream indices must be integers or slices, not {type(key).__name__}")

    def __array__(self, dtype=None, copy=None):
        data = self.read(0, self._len)
        return data if dtype is None else data.astype(dtype)
