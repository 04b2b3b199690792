"""The planner's layout search at cluster scale: Llama 3.1 405B on 16,384 H100s at a 16M-token batch,
searched with nothing fixed (issue: the search for 16,384 GPUs under 5 s on the 2-core machine).

    python benchmarks/layout_search.py [--repeats 3]

Prints the search's wall time (best of the repeats), the layouts it evaluated and the chosen one, and
as the same-run reference the time of one pure-Python loop of 10^6 float additions on this host, with
the ratio between them (hosts and load differ: compare ratios)."""

from __future__ import annotations

import argparse
import time

from models.config import ModelConfig
from scaling.planning.layout_search import search

LLAMA31_405B = ModelConfig(
    d_model=16384, n_layers=126, n_heads=128, n_kv_heads=8, d_ff=53248, vocab_size=128256, seq_len=8192
)


def reference() -> float:
    t = time.perf_counter()
    x = 0.0
    for i in range(1_000_000):
        x += i * 0.5
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    best, got = float("inf"), None
    for _ in range(args.repeats):
        t = time.perf_counter()
        got = search(LLAMA31_405B, num_devices=16384, global_batch_size=2048, device="h100-sxm", devices_per_node=8)
        best = min(best, time.perf_counter() - t)
    ref = min(reference() for _ in range(args.repeats))
    print(f"search: {best:.3f} s for {got['searched']:,} layouts ({best / got['searched'] * 1e6:.0f} us each)")
    print(f"chosen: {got['describe']}; predicted MFU {got['performance']['mfu']:.3f}")
    print(f"reference (10^6 Python float additions): {ref:.3f} s; search / reference = {best / ref:.2f}")
    print("target: under 5 s" + (" (met)" if best < 5 else " (NOT met)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
