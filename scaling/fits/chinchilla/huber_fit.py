"""Chinchilla Approach 3's core: fit L(N, D) = E + A/N^alpha + B/D^beta by minimising a Huber loss.

The objective, its grid of starts and bounds, and theta -> parameters; `scaling.fits.chinchilla.mle`
and `scaling.fits.chinchilla.data_constrained` reuse them, and `fit_chinchilla` (`scaling.fits.chinchilla.approaches`)
is the entry point that runs them.

Parametrisation (Hoffmann et al. 2022, Epoch 2024): theta = (a, b, e, alpha, beta) with
A = exp(a), B = exp(b), E = exp(e) and log L_hat = LSE(a - alpha log N, b - beta log D, e).
Objective: SUM over runs of Huber_delta(log L_hat - log L), delta = 1e-3, with analytic gradient.
Optimiser: L-BFGS-B from a grid of starts (the paper's 4,500-point grid, or its best `top_k`
points after a vectorised evaluation of the whole grid), tolerances ftol=0, gtol=1e-10.
"""

from __future__ import annotations

import itertools

import numpy as np

from scaling.core.huber import DELTA, huber, huber_grad
from scaling.core.multistart import MultiStartResult, multistart_lbfgsb

THETA = ("a", "b", "e", "alpha", "beta")  # internal order: log A, log B, log E, alpha, beta

# The paper's grid (as re-implemented by Epoch): 6 * 6 * 5 * 5 * 5 = 4500 starts.
PAPER_GRID = {
    "alpha": [0.0, 0.5, 1.0, 1.5, 2.0],
    "beta": [0.0, 0.5, 1.0, 1.5, 2.0],
    "e": [-1.0, -0.5, 0.0, 0.5, 1.0],
    "a": [0.0, 5.0, 10.0, 15.0, 20.0, 25.0],
    "b": [0.0, 5.0, 10.0, 15.0, 20.0, 25.0],
}

# Wide boxes: only there to keep exp() finite and to detect runaway parameters (bound hits warn).
BOUNDS = {"a": (-30.0, 80.0), "b": (-30.0, 80.0), "e": (-10.0, 5.0), "alpha": (0.0, 5.0), "beta": (0.0, 5.0)}


def paper_grid() -> np.ndarray:
    """The 4500 starting points as rows in THETA order."""
    rows = itertools.product(PAPER_GRID["a"], PAPER_GRID["b"], PAPER_GRID["e"], PAPER_GRID["alpha"], PAPER_GRID["beta"])
    return np.array(list(rows), dtype=float)


class Objective:
    """Sum of Huber(log-residuals) for fixed data; callable as f(theta) -> (value, gradient)."""

    def __init__(self, N, D, L, delta: float = DELTA):
        self.logN = np.log(np.asarray(N, dtype=float))
        self.logD = np.log(np.asarray(D, dtype=float))
        self.logL = np.log(np.asarray(L, dtype=float))
        self.delta = delta

    def __call__(self, th: np.ndarray) -> tuple[float, np.ndarray]:
        a, b, e, alpha, beta = th
        t1 = a - alpha * self.logN
        t2 = b - beta * self.logD
        m = np.maximum(np.maximum(t1, t2), e)
        w1 = np.exp(t1 - m)
        w2 = np.exp(t2 - m)
        w3 = np.exp(e - m)
        s = w1 + w2 + w3
        r = m + np.log(s) - self.logL
        g = huber_grad(r, self.delta) / s
        g1 = g * w1
        g2 = g * w2
        grad = np.array([g1.sum(), g2.sum(), (g * w3).sum(), -(g1 @ self.logN), -(g2 @ self.logD)])
        return float(huber(r, self.delta).sum()), grad

    def batch(self, thetas: np.ndarray) -> np.ndarray:
        """Objective at many parameter vectors at once (rows of `thetas`), for ranking a grid."""
        return huber(self.batch_residuals(thetas), self.delta).sum(axis=1)

    def batch_residuals(self, thetas: np.ndarray) -> np.ndarray:
        """Log residuals (one row per parameter vector in `thetas`)."""
        th = np.atleast_2d(thetas)
        t1 = th[:, 0:1] - th[:, 3:4] * self.logN[None, :]
        t2 = th[:, 1:2] - th[:, 4:5] * self.logD[None, :]
        e = np.broadcast_to(th[:, 2:3], t1.shape)
        return np.logaddexp(np.logaddexp(t1, t2), e) - self.logL[None, :]

    def residuals(self, th: np.ndarray) -> np.ndarray:
        a, b, e, alpha, beta = th
        lse = np.logaddexp(np.logaddexp(a - alpha * self.logN, b - beta * self.logD), e)
        return lse - self.logL

    def jacobian(self, th: np.ndarray) -> np.ndarray:
        """d residuals / d theta (n x 5): the softmax weights of the three LSE terms."""
        a, b, e, alpha, beta = th
        t1 = a - alpha * self.logN
        t2 = b - beta * self.logD
        m = np.maximum(np.maximum(t1, t2), e)
        w1, w2, w3 = np.exp(t1 - m), np.exp(t2 - m), np.exp(e - m)
        s = w1 + w2 + w3
        p1, p2 = w1 / s, w2 / s
        return np.column_stack([p1, p2, w3 / s, -p1 * self.logN, -p2 * self.logD])


def fit_theta(
    N,
    D,
    L,
    *,
    grid: str = "fast",
    top_k: int = 32,
    delta: float = DELTA,
    extra_starts=(),
    starts: np.ndarray | None = None,
    polish: bool = True,
) -> MultiStartResult:
    """Best theta over the grid. grid='full' runs L-BFGS-B from all 4500 starts (or all `starts`);
    'fast' from the `top_k` best grid points (ranked by a vectorised objective evaluation), plus
    `extra_starts` in both modes. `polish` restarts L-BFGS-B once from the best point."""
    obj = Objective(N, D, L, delta)
    grid_pts = paper_grid() if starts is None else np.atleast_2d(starts)
    bounds = [BOUNDS[k] for k in THETA]
    k = None if grid == "full" else top_k
    res = multistart_lbfgsb(obj, grid_pts, bounds, top_k=k, batch_objective=obj.batch, extra_starts=extra_starts)
    if polish:  # one more run from the best point (fresh L-BFGS memory): cheap and never worse
        again = multistart_lbfgsb(obj, res.x[None, :], bounds, top_k=None)
        if again.fun < res.fun:
            res.x, res.fun, res.nit = again.x, again.fun, res.nit + again.nit
    return res


def theta_to_params(th: np.ndarray) -> dict[str, float]:
    """(a, b, e, alpha, beta) -> the published parameters plus derived a, b, G of the frontier."""
    la, lb, le, alpha, beta = (float(v) for v in th)
    out = {"E": float(np.exp(le)), "A": float(np.exp(la)), "B": float(np.exp(lb)), "alpha": alpha, "beta": beta}
    s = alpha + beta
    if s > 0:
        out["a"] = beta / s
        out["b"] = alpha / s
        if alpha > 0 and beta > 0:
            out["G"] = float(np.exp((np.log(alpha) + la - np.log(beta) - lb) / s))
        else:
            out["G"] = float("nan")
    else:
        out["a"] = out["b"] = out["G"] = float("nan")
    return out
