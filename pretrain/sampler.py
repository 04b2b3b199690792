"""Deterministic, resumable batch sampler over fixed windows of a token array.

Sample i of the run (counting over all steps, ranks and micro-batches) is window
perm_epoch[i mod n] with epoch = i // n, where perm_epoch is a seeded permutation. The
position in the data is therefore a pure function of the step: resume needs only the step,
and a different world size sees the same global batch.
"""
from __future__ import annotations

import numpy as np
import torch


class WindowSampler:
    def __init__(self, tokens: np.ndarray, seq_len: int, seed: int):
        self.tokens, self.seq_len, self.seed = tokens, seq_len, seed
        self.n_windows = (len(tokens) - 1) // seq_len
        if self.n_windows < 1:
            raise ValueError(f"the training split has {len(tokens)} tokens, fewer than one window of {seq_len + 1}")
        self._perm_epoch, self._perm = -1, None

    def _window(self, sample: int) -> int:
        epoch, idx = divmod(sample, self.n_windows)
        if epoch != self._perm_epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n_windows)
            self._perm_epoch = epoch
        return int(self._perm[idx])

    def batch(self, first_sample: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, targets) for samples first_sample .. first_sample+size-1, int64 (size, seq_len)."""
        rows = np.empty((size, self.seq_len + 1), dtype=np.int64)
        for r in range(size):
            start = self._window(first_sample + r) * self.seq_len
            rows[r] = self.tokens[start : start + self.seq_len + 1]
        t = torch.from_numpy(rows)
        return t[:, :-1], t[:, 1:]

    def epochs(self, samples: int) -> float:
        return samples / self.n_windows


def micro_batch_start(step: int, micro: int, rank: int, global_batch: int, micro_batch: int, world: int) -> int:
    """First global sample index of (step, micro-step, rank): micro-steps outer, ranks inner."""
    return step * global_batch + (micro * world + rank) * micro_batch
