"""Compute-optimal allocation of a loss law under a compute convention.

Under C = 6 N D with the law's own N (the exact case) Chinchilla's closed form applies. Otherwise
(trainer FLOPs, or 6 N D of another parameter count) C = k(N) D with k from the runs
(`conventions.TokenCost`) and the optimum is found numerically: loss on a fine log-N grid along
D = C / k(N), refined by a parabola through the best grid point and its neighbours.
"""

from __future__ import annotations

import numpy as np

from scaling.core.conventions import TokenCost

GRID_POINTS = 4001


def allocate(predict, C: float, cost: TokenCost, n_range: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """(N_opt, D_opt) minimising predict(N, C / k(N)) over N in n_range. `predict` may carry a
    leading axis of parameter samples (shape (S, 1) parameters): results then have shape (S,).
    NaN where the minimum sits on the grid's edge (no interior optimum in the range)."""
    grid = np.geomspace(n_range[0], n_range[1], GRID_POINTS)
    x = np.log(grid)
    with np.errstate(all="ignore"):
        L = np.asarray(predict(grid, C / cost(grid)), dtype=float)
    L = np.where(np.isfinite(L), L, np.inf)
    i = np.argmin(L, axis=-1)
    interior = (i > 0) & (i < GRID_POINTS - 1)
    j = np.clip(i, 1, GRID_POINTS - 2)
    take = lambda off: np.take_along_axis(L, (j + off)[..., None], axis=-1)[..., 0]  # noqa: E731
    y0, y1, y2 = take(-1), take(0), take(1)
    h = x[1] - x[0]
    denom = y0 - 2 * y1 + y2
    with np.errstate(all="ignore"):
        shift = np.where(denom > 0, 0.5 * h * (y0 - y2) / denom, 0.0)
    xs = x[j] + np.clip(shift, -h, h)
    n_opt = np.where(interior, np.exp(xs), np.nan)
    with np.errstate(all="ignore"):
        d_opt = C / cost(n_opt)
    return n_opt, d_opt


def search_range(N: np.ndarray) -> tuple[float, float]:
    """Where an optimum may be looked for: three decades below to four above the fitted sizes."""
    return float(np.min(N)) / 1e3, float(np.max(N)) * 1e4


def optimal(law, C, cost: TokenCost, n_range: tuple[float, float]):
    """(N_opt, D_opt) for a point-estimate law: closed form when exact, numeric otherwise."""
    if cost.exact and hasattr(law, "compute_optimal"):
        return law.compute_optimal(C)
    n, d = allocate(law.predict, float(C), cost, n_range)
    return float(n), float(d)
