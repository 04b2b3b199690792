"""Which data-parallel ranks update which whole tensors (Muon needs each matrix whole).

`balanced`: greedy largest-first onto the least-loaded rank, by each tensor's update cost (Newton-
Schulz FLOPs for Muon matrices, elements for AdamW tensors), as Canzona (arXiv 2602.06079)
balances whole-matrix ownership. `flat`: what ZeRO's flat partitioning gives: the tensors are laid
end to end and cut into equal contiguous chunks, and a rank updates every tensor that overlaps its
chunk (a tensor cut by a boundary is orthogonalised by each rank that holds a piece, as DeepSpeed's
own ZeRO-1/2 Muon does). `replicated`: every rank updates everything (ZeRO-0). Pure functions of
shapes: every rank computes the same assignment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MODES = ("replicated", "balanced", "flat")


def ns_flops(shape: tuple[int, ...], ns_steps: int) -> float:
    """Newton-Schulz FLOPs of one (possibly stacked) m x n matrix, m <= n: per step X X^T (2m^2 n),
    (A)(A) (2m^3) and B X (2m^2 n)."""
    *lead, a, b = shape
    m, n = min(a, b), max(a, b)
    return math.prod(lead) * ns_steps * (4.0 * m * m * n + 2.0 * m**3)


@dataclass(frozen=True)
class Assignment:
    workers: list[frozenset[int]]  # per tensor: the ranks that compute its update
    source: list[int]  # per tensor: the rank whose result every rank takes (broadcast from it)

    def load(self, costs: list[float], world_size: int) -> list[float]:
        """Update cost per rank (a tensor computed by several ranks counts on each)."""
        out = [0.0] * world_size
        for w, c in zip(self.workers, costs):
            for r in w:
                out[r] += c
        return out


def balanced(costs: list[float], world_size: int) -> list[int]:
    """Owner rank per item: largest first onto the least-loaded rank (ties: lowest rank, first item)."""
    load = [0.0] * world_size
    owner = [0] * len(costs)
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        r = min(range(world_size), key=lambda r: (load[r], r))
        owner[i] = r
        load[r] += costs[i]
    return owner


def flat(sizes: list[int], world_size: int) -> list[frozenset[int]]:
    """Ranks whose contiguous 1/world_size chunk of the concatenated tensors overlaps each tensor."""
    total = sum(sizes)
    chunk = math.ceil(total / world_size) if total else 1
    out, start = [], 0
    for n in sizes:
        end = start + max(n, 1)
        out.append(frozenset(range(start // chunk, min((end - 1) // chunk, world_size - 1) + 1)))
        start += n
    return out


def assign(
    mode: str, kinds: list[str], shapes: list[tuple[int, ...]], world_size: int, ns_steps: int = 5
) -> Assignment:
    """`kinds[i]` is "muon" or "adamw". Muon matrices and AdamW tensors are balanced separately (their
    costs are in different units) and each class starts from empty ranks."""
    if mode not in MODES:
        raise ValueError(f"assignment mode must be one of {', '.join(MODES)} (got {mode!r})")
    n = len(shapes)
    everyone = frozenset(range(world_size))
    if mode == "replicated" or world_size == 1:
        return Assignment([everyone] * n, [0] * n)
    workers: list[frozenset[int]] = [everyone] * n
    for kind in ("muon", "adamw"):
        idx = [i for i in range(n) if kinds[i] == kind]
        if mode == "balanced":
            costs = [ns_flops(shapes[i], ns_steps) if kind == "muon" else float(math.prod(shapes[i])) for i in idx]
            for i, r in zip(idx, balanced(costs, world_size)):
                workers[i] = frozenset((r,))
        else:
            for i, w in zip(idx, flat([math.prod(shapes[i]) for i in idx], world_size)):
                workers[i] = w
    return Assignment(workers, [min(w) for w in workers])
