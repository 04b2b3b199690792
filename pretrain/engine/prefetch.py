"""A one-deep background prefetch of the next micro-batch, pinned for an asynchronous copy.

The order the train module asks for micro-batches is fixed: (step, 0), (step, 1), ...,
(step, gas - 1), (step + 1, 0), ... While the device runs one micro-batch, a worker thread reads
the next one's windows from the memory-mapped shards (pretrain/feed/sampler.py) and, on CUDA, copies
them into page-locked (pinned) host memory, from which `to(device, non_blocking=True)` is a DMA
transfer that does not block the host: it queues ahead of the forward on the same stream (torch's
pinned-memory allocator keeps the host buffer until the copy is done).

A micro-batch is a pure function of its (step, micro) key, so prefetching never changes what is
trained: a request that is not the one prefetched (the first after a start or resume, or any
other order) is read on demand, and a prefetch that is never asked for (after the last step or a
stop) is dropped. Every read runs on the one worker thread, so the sampler is never entered by
two threads at once. On CPU there is no pinning and the copy is a no-op; the thread still
overlaps the read with the step.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import torch

Batch = tuple[torch.Tensor, torch.Tensor]


class Prefetcher:
    def __init__(
        self,
        read: Callable[[int, int], Batch],
        grad_accum: int,
        total_steps: int,
        device: torch.device,
        pin: bool | None = None,
    ):
        self.read, self.gas, self.total_steps, self.device = read, grad_accum, total_steps, device
        self.pin = device.type == "cuda" if pin is None else pin
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scalelab-prefetch")
        self._next: tuple[tuple[int, int], Future] | None = None
        self.hits = self.misses = 0  # requests served from the prefetch / read on demand

    def _load(self, step: int, micro: int) -> Batch:
        x, y = self.read(step, micro)
        if self.pin:  # page-locked: the copy to the device is then an asynchronous DMA
            x, y = x.pin_memory(), y.pin_memory()
        return x, y

    def following(self, step: int, micro: int) -> tuple[int, int] | None:
        """The key asked for after (step, micro), or None after the last step's last micro-batch."""
        if micro + 1 < self.gas:
            return step, micro + 1
        return (step + 1, 0) if step + 1 < self.total_steps else None

    def get(self, step: int, micro: int) -> Batch:
        """Micro-batch (step, micro) on the device (a non-blocking copy from pinned memory on CUDA);
        starts reading the one after it."""
        key = (step, micro)
        if self._next is not None and self._next[0] == key:
            future = self._next[1]
            self.hits += 1
        else:
            future = self._pool.submit(self._load, step, micro)  # after any read in flight: one thread
            self.misses += 1
        x, y = future.result()
        nxt = self.following(step, micro)
        self._next = (nxt, self._pool.submit(self._load, *nxt)) if nxt is not None else None
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def close(self) -> None:
        self._next = None
        self._pool.shutdown(wait=True, cancel_futures=True)
