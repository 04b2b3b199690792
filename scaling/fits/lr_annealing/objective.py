"""The annealing law's objective and optimiser: sum of Huber(delta) log residuals over every point of
every curve, L-BFGS-B (all parameters >= 0) from a grid of starts, analytic gradient.

A point is the mean of L(s) over updates lo..hi (a logged training loss averages its log window;
lo = hi for a point measurement), computed from prefix sums so one evaluation costs O(steps).
Parameters are optimised divided by data scales (loss for L0 and A, loss / max S2 for C), so
L-BFGS-B sees numbers of order one whatever the lr's units.
"""

from __future__ import annotations

import itertools

import numpy as np

from scaling.core.errors import FitError
from scaling.core.huber import DELTA, huber, huber_grad
from scaling.core.multistart import MultiStartResult, multistart_lbfgsb
from scaling.laws.lr_annealing import LAMBDA, PARAMS, areas

EPS = 1e-12  # predictions are clamped here before the log (a law gone negative is just a bad start)
# The authors' published starting grid (Tissue et al. 2024, fitting script): 2 x 3 x 3 x 3 points.
PAPER_GRID = {
    "L0": np.linspace(0.1, 2.1, 2),
    "A": np.linspace(1, 22, 3),
    "C": np.linspace(1, 22, 3),
    "alpha": np.linspace(0, 0.8, 3),
}
# Data-scaled starts: L0 as a fraction of the lowest loss and alpha; A and C then by non-negative
# least squares (the law is linear in them once L0 and alpha are fixed).
L0_FRACTIONS = (0.0, 0.4, 0.7, 0.9)
ALPHAS = (0.1, 0.25, 0.5, 0.8, 1.2)


class Problem:
    """The curves' areas and observations, laid end to end; `weights` per curve (bootstrap counts)."""

    def __init__(self, curves, lam: float = LAMBDA, warmup: str = "peak", delta: float = DELTA):
        self.delta = delta
        s1s, s2s, lo, hi, y, cid = [], [], [], [], [], []
        off = 0
        for i, c in enumerate(curves):
            T = int(c.hi.max())  # the law is needed up to the last observed update only
            s1, s2 = areas(c.lr, lam, warmup)
            s1s.append(s1[1 : T + 1])
            s2s.append(s2[1 : T + 1])
            lo.append(off + c.lo - 1)
            hi.append(off + c.hi - 1)
            y.append(c.loss)
            cid.append(np.full(c.loss.size, i))
            off += T
        self.s1, s2 = np.concatenate(s1s), np.concatenate(s2s)
        self.log_s1 = np.log(self.s1)
        self.a, self.b = np.concatenate(lo), np.concatenate(hi) + 1  # half-open windows [a, b)
        self.n = (self.b - self.a).astype(float)
        self.y = np.concatenate(y)
        self.log_y = np.log(self.y)
        self.curve = np.concatenate(cid)
        self.n_curves = len(curves)
        self.ws2 = self._window(s2)
        self.w = np.ones(self.y.size)
        self.s2_max = float(self.ws2.max())
        y_max = float(self.y.max())
        self.scale = np.array([y_max, y_max, 1.0, y_max / self.s2_max if self.s2_max > 0 else 1.0])

    def _window(self, v: np.ndarray) -> np.ndarray:
        cs = np.concatenate([[0.0], np.cumsum(v)])
        return (cs[self.b] - cs[self.a]) / self.n

    def set_curve_weights(self, counts: np.ndarray) -> None:
        self.w = np.asarray(counts, dtype=float)[self.curve]

    def predict(self, p: np.ndarray) -> np.ndarray:
        L0, A, alpha, C = p
        return L0 + A * self._window(np.exp(-alpha * self.log_s1)) - C * self.ws2

    def residuals(self, p: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(self.predict(p), EPS)) - self.log_y

    def __call__(self, u: np.ndarray) -> tuple[float, np.ndarray]:
        """Objective and gradient in the scaled parameters u = p / scale."""
        L0, A, alpha, C = u * self.scale
        f = np.exp(-alpha * self.log_s1)
        wf, wg = self._window(f), self._window(f * self.log_s1)
        pred = L0 + A * wf - C * self.ws2
        ok = pred > EPS
        r = np.log(np.where(ok, pred, EPS)) - self.log_y
        g = self.w * huber_grad(r, self.delta) * ok / np.where(ok, pred, 1.0)
        grad = np.array([g.sum(), g @ wf, -A * (g @ wg), -(g @ self.ws2)])
        return float(self.w @ huber(r, self.delta)), grad * self.scale

    def value(self, p: np.ndarray) -> float:
        return float(self.w @ huber(self.residuals(p), self.delta))


def starts(prob: Problem) -> np.ndarray:
    """Candidate starting points (rows of L0, A, alpha, C): the data-scaled grid and the paper's."""
    from scipy.optimize import nnls  # deferred: scipy.optimize is slow to import

    rows = []
    lmin = float(prob.y.min())
    for frac, alpha in itertools.product(L0_FRACTIONS, ALPHAS):
        L0 = frac * lmin
        wf = prob._window(np.exp(-alpha * prob.log_s1))
        sw = np.sqrt(prob.w)
        M = np.column_stack([wf, -prob.ws2]) * sw[:, None]
        (A, C), _ = nnls(M, (prob.y - L0) * sw)
        rows.append([L0, A, alpha, C])
    for L0, A, C, alpha in itertools.product(PAPER_GRID["L0"], PAPER_GRID["A"], PAPER_GRID["C"], PAPER_GRID["alpha"]):
        rows.append([L0, A, alpha, C])
    return np.array(rows, dtype=float)


def bounds(prob: Problem, fix_C_zero: bool = False) -> list[tuple[float, float]]:
    """Boxes in real units: >= 0 (the paper's), upper ends only wide enough to catch runaway values."""
    y_max = float(prob.y.max())
    c_hi = 0.0 if fix_C_zero else 1e3 * prob.scale[3]
    return [(0.0, 2.0 * y_max), (0.0, 1e4 * y_max), (0.0, 5.0), (0.0, c_hi)]


def fit(
    prob: Problem, *, top_k: int = 8, extra_starts=(), fix_C_zero: bool = False, grid: np.ndarray | None = None
) -> MultiStartResult:
    """Best parameters (in real units, PARAMS order) from the best `top_k` starts plus `extra_starts`,
    then one polishing restart from the best point."""
    b = bounds(prob, fix_C_zero)
    sc = prob.scale
    ub = [(lo / s, hi / s) for (lo, hi), s in zip(b, sc)]
    g = starts(prob) if grid is None else np.atleast_2d(grid)
    if fix_C_zero:
        g = g.copy()
        g[:, 3] = 0.0
    ranked = _rank(prob, g, top_k)
    extra = [np.asarray(e, dtype=float) / sc for e in extra_starts]
    res = multistart_lbfgsb(prob, ranked / sc, ub, top_k=None, extra_starts=extra)
    again = multistart_lbfgsb(prob, res.x[None, :], ub, top_k=None)
    if again.fun < res.fun:
        res.x, res.fun, res.nit = again.x, again.fun, res.nit + again.nit
    res.x = res.x * sc
    res.n_starts = len(g)
    if not np.isfinite(res.fun):
        raise FitError("no start gave a finite objective")
    return res


def _rank(prob: Problem, g: np.ndarray, top_k: int) -> np.ndarray:
    vals = np.array([prob.value(p) for p in g])
    vals = np.where(np.isfinite(vals), vals, np.inf)
    return g[np.argsort(vals, kind="stable")[:top_k]]


def as_params(x) -> dict[str, float]:
    return dict(zip(PARAMS, map(float, x)))
