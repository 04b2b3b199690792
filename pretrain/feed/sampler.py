"""Deterministic, resumable batch samplers over fixed windows of a token stream.

Sample i of the run (counting over all steps, ranks and micro-batches) is window
perm_epoch[i mod n] with epoch = i // n, where perm_epoch is a seeded permutation. The
position in the data is therefore a pure function of the step: resume needs only the step,
and a different world size sees the same global batch.

The tokens are any 1-D sequence with len() and slicing: a memmap, or a `TokenStream` over a
split's shards (windows may straddle shard boundaries; the stream is the shards concatenated,
so a split gives the same windows however it was sharded).

`MixtureSampler` draws from several such streams: a fixed seeded pattern of `period` slots,
`quota[c]` of them for component c, repeats forever; sample i is slot i mod period of the
pattern, and it is component c's k-th draw with k = (i // period) * quota[c] + (draws of c in
the pattern before that slot). Which component and which of its windows sample i reads, and
how many samples each component has given after n samples, are closed-form functions of i.
"""

from __future__ import annotations

import threading

import numpy as np
import torch


class WindowSampler:
    def __init__(self, tokens, seq_len: int, seed: int, stream: int | None = None):
        self.tokens, self.seq_len, self.seed, self.stream = tokens, seq_len, seed, stream
        self.n_windows = (len(tokens) - 1) // seq_len
        if self.n_windows < 1:
            raise ValueError(f"the training split has {len(tokens)} tokens, fewer than one window of {seq_len + 1}")
        self._perms: dict[int, np.ndarray] = {}  # the last epochs' permutations (a batch spans at most two)
        # the trainer's prefetch thread and the main thread (noise-scale probe) may both read
        self._lock = threading.Lock()

    def _perm(self, epoch: int) -> np.ndarray:
        with self._lock:
            perm = self._perms.get(epoch)
            if perm is None:
                key = [self.seed, epoch] if self.stream is None else [self.seed, self.stream, epoch]
                perm = np.random.default_rng(key).permutation(self.n_windows)
                if len(self._perms) >= 2:
                    self._perms.pop(next(iter(self._perms)))
                self._perms[epoch] = perm
            return perm

    def windows(self, samples: np.ndarray) -> np.ndarray:
        """Window index of each sample (int64 array in, int64 array out)."""
        epochs, idx = np.divmod(np.asarray(samples, dtype=np.int64), self.n_windows)
        out = np.empty(len(idx), dtype=np.int64)
        for e in np.unique(epochs):  # one epoch per batch, two where a batch crosses an epoch's end
            sel = epochs == e
            out[sel] = self._perm(int(e))[idx[sel]]
        return out

    def row(self, sample: int) -> np.ndarray:
        """Tokens of window `sample` plus the next token (seq_len + 1)."""
        start = int(self.windows(np.array([sample]))[0]) * self.seq_len
        return self.tokens[start : start + self.seq_len + 1]

    def rows(self, samples: np.ndarray) -> np.ndarray:
        """int64 (len(samples), seq_len + 1): the windows of `samples`, gathered by one indexing op."""
        return take_windows(self.tokens, self.windows(samples) * self.seq_len, self.seq_len + 1)

    def batch(self, first_sample: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, targets) for samples first_sample .. first_sample+size-1, int64 (size, seq_len)."""
        return _split(self.rows(np.arange(first_sample, first_sample + size, dtype=np.int64)))

    def epochs(self, samples: int) -> float:
        return samples / self.n_windows


def take_windows(tokens, starts: np.ndarray, length: int) -> np.ndarray:
    """int64 (len(starts), length): tokens[s : s + length] for each start, without a Python loop
    over rows: one fancy index into a sliding-window view of a memmap/array (a row-wise copy, no
    per-token index array), or a `TokenStream`'s own `windows` (the same, once per shard touched)."""
    windows = getattr(tokens, "windows", None)
    if windows is not None:
        rows = windows(starts, length)
    else:
        rows = np.lib.stride_tricks.sliding_window_view(np.asarray(tokens), length)[np.asarray(starts, dtype=np.int64)]
    return rows.astype(np.int64, copy=False)


def _split(rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    t = torch.from_numpy(rows)
    return t[:, :-1], t[:, 1:]


def mixture_quotas(weights: list[float], period: int) -> list[int]:
    """Integer slots per component summing to `period` (largest remainder; every component >= 1)."""
    if period < len(weights):
        raise ValueError(f"data.mixture_period={period} is smaller than the number of components ({len(weights)})")
    w = np.asarray(weights, dtype=np.float64)
    exact = w / w.sum() * period
    quotas = np.maximum(1, np.floor(exact).astype(np.int64))
    while quotas.sum() > period:  # the minimum of 1 took slots: give them back from the most over-served
        over = np.where(quotas > 1, quotas - exact, -np.inf)
        quotas[int(np.argmax(over))] -= 1
    order = np.argsort(-(exact - quotas), kind="stable")
    for i in range(int(period - quotas.sum())):
        quotas[order[i % len(order)]] += 1
    return quotas.tolist()


class MixtureSampler:
    def __init__(self, streams: list, weights: list[float], seq_len: int, seed: int, period: int):
        self.seq_len, self.period = seq_len, period
        self.quotas = np.asarray(mixture_quotas(weights, period), dtype=np.int64)
        pattern = np.repeat(np.arange(len(streams)), self.quotas)
        self.pattern = np.random.default_rng([seed, 0x6D6978]).permutation(pattern)  # 'mix'
        # draws[c, j]: how many of the first j slots of the pattern belong to component c
        self.draws = np.zeros((len(streams), period + 1), dtype=np.int64)
        for c in range(len(streams)):
            self.draws[c, 1:] = np.cumsum(self.pattern == c)
        self.components = [WindowSampler(t, seq_len, seed, stream=c + 1) for c, t in enumerate(streams)]

    def locate(self, sample: int) -> tuple[int, int]:
        """(component, that component's own sample index) of global sample `sample`."""
        block, slot = divmod(sample, self.period)
        c = int(self.pattern[slot])
        return c, block * int(self.quotas[c]) + int(self.draws[c, slot])

    def counts(self, samples: int) -> np.ndarray:
        """Samples drawn from each component among the first `samples`."""
        block, slot = divmod(samples, self.period)
        return block * self.quotas + self.draws[:, slot]

    def row(self, sample: int) -> np.ndarray:
        c, k = self.locate(sample)
        return self.components[c].row(k)

    def batch(self, first_sample: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        samples = np.arange(first_sample, first_sample + size, dtype=np.int64)
        block, slot = np.divmod(samples, self.period)
        comp = self.pattern[slot]
        own = block * self.quotas[comp] + self.draws[comp, slot]  # each sample's index within its component
        rows = np.empty((size, self.seq_len + 1), dtype=np.int64)
        for c in np.unique(comp):  # one gather per component present in the batch
            sel = comp == c
            rows[sel] = self.components[int(c)].rows(own[sel])
        return _split(rows)


def micro_batch_start(step: int, micro: int, rank: int, global_batch: int, micro_batch: int, world: int) -> int:
    """First global sample index of (step, micro-step, rank): micro-steps outer, ranks inner."""
    return step * global_batch + (micro * world + rank) * micro_batch
