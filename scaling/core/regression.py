"""(Weighted) least squares in log space: the frontier and power-law regressions of the fits."""

from __future__ import annotations

import numpy as np


def ols(X: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """(Weighted) least squares y ~ [1, X] b. Returns (coefficients incl. intercept, R^2)."""
    X = np.atleast_2d(np.asarray(X, dtype=float))
    y = np.asarray(y, dtype=float)
    if X.shape[0] != len(y):
        X = X.T
    A = np.column_stack([np.ones(len(y)), X])
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    sw = np.sqrt(w)
    coef, *_ = np.linalg.lstsq(A * sw[:, None], y * sw, rcond=None)
    resid = y - A @ coef
    ybar = float(w @ y / w.sum())
    ss = float(w @ (y - ybar) ** 2)
    r2 = 1.0 - float(w @ resid**2) / ss if ss > 0 else float("nan")
    return coef, r2
