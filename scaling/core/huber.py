"""Huber loss on log-residuals, the robust objective used by Chinchilla Approach 3.

The objective is the SUM (not the mean) of Huber terms: with delta=1e-3 a mean makes the
gradient ~1/n smaller and L-BFGS stops early -- the failure Epoch diagnosed in the original fit.
"""

from __future__ import annotations

import numpy as np

DELTA = 1e-3


def huber(r: np.ndarray, delta: float = DELTA) -> np.ndarray:
    """Elementwise Huber: r^2/2 inside |r| <= delta, delta*(|r| - delta/2) outside."""
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


def huber_grad(r: np.ndarray, delta: float = DELTA) -> np.ndarray:
    """dH/dr = clip(r, -delta, delta)."""
    return np.clip(r, -delta, delta)
