"""The trainer's one-deep micro-batch prefetch (pretrain/engine/prefetch.py) on CPU: the batches it
hands out are the sampler's, in the train module's order, read ahead on its worker thread; a
resumed run (a prefetcher started at a later step) gets the same batches as an uninterrupted one;
nothing is read past the last step."""

from __future__ import annotations

import threading

import numpy as np
import torch

from pretrain.engine.prefetch import Prefetcher
from pretrain.feed.sampler import WindowSampler, micro_batch_start

GAS, STEPS, MB = 3, 5, 4


def reader(log: list):
    sampler = WindowSampler(np.arange(50_000, dtype=np.uint16) % 997, 16, seed=2)

    def read(step, micro):
        log.append((step, micro, threading.current_thread().name))
        return sampler.batch(micro_batch_start(step, micro, 0, GAS * MB, MB, 1), MB)

    return sampler, read


def order(first_step: int = 0):
    return [(s, m) for s in range(first_step, STEPS) for m in range(GAS)]


def test_batches_equal_the_samplers_in_order_and_are_read_ahead_on_the_worker():
    log = []
    sampler, read = reader(log)
    pf = Prefetcher(read, GAS, STEPS, torch.device("cpu"))
    try:
        for s, m in order():
            x, y = pf.get(s, m)
            ex, ey = sampler.batch(micro_batch_start(s, m, 0, GAS * MB, MB, 1), MB)
            assert torch.equal(x, ex) and torch.equal(y, ey) and x.device.type == "cpu"
    finally:
        pf.close()
    assert pf.misses == 1 and pf.hits == STEPS * GAS - 1  # only the very first read waited on demand
    assert [(s, m) for s, m, _ in log] == order()  # each read once, in order, none past the last step
    assert {name for _, _, name in log} == {"scalelab-prefetch_0"}  # never on the training thread


def test_a_resumed_prefetcher_hands_out_the_uninterrupted_runs_batches():
    full_pf = Prefetcher(reader([])[1], GAS, STEPS, torch.device("cpu"))
    full = {k: full_pf.get(*k) for k in order()}
    full_pf.close()
    log = []
    resumed = Prefetcher(reader(log)[1], GAS, STEPS, torch.device("cpu"))  # as after a checkpoint at step 2
    for k in order(2):
        x, y = resumed.get(*k)
        assert torch.equal(x, full[k][0]) and torch.equal(y, full[k][1])
    resumed.close()
    assert resumed.misses == 1 and [(s, m) for s, m, _ in log] == order(2)


def test_a_request_out_of_order_is_read_on_demand():
    sampler, read = reader([])
    pf = Prefetcher(read, GAS, STEPS, torch.device("cpu"))
    pf.get(0, 0)  # prefetches (0, 1)
    x, _ = pf.get(3, 2)  # not the prefetched one
    assert torch.equal(x, sampler.batch(micro_batch_start(3, 2, 0, GAS * MB, MB, 1), MB)[0])
    assert pf.misses == 2 and pf.following(3, 2) == (4, 0) and pf.following(STEPS - 1, GAS - 1) is None
    pf.close()


def test_pinned_memory_only_for_cuda():
    assert not Prefetcher(lambda s, m: None, 1, 1, torch.device("cpu")).pin
    assert Prefetcher(lambda s, m: None, 1, 1, torch.device("cuda", 0)).pin  # constructed only: no GPU here
