"""The objectives the MoE laws are fitted with: summed Huber(delta) of log-loss residuals, as every law.

Krajewski (7 parameters), parametrised like Chinchilla's approach 3 (and like the paper's own fit):
    log L_hat = LSE(LSE(lg - gamma log G, la) - alpha log N, lb - beta log D, lc),
    g = exp(lg), a = exp(la), b = exp(lb), c = exp(lc).
Starts: the Hoffmann/Epoch grid of the Chinchilla fit extended by g and gamma, 108,000 points,
ranked by one vectorised evaluation; L-BFGS-B (ftol = 0, gtol = 1e-10) from the best `top_k`.
With a single granularity in the data g and gamma do not exist for the fit (g / G^gamma + a is
one number): it is then the Chinchilla form, fitted by `scaling.fits.chinchilla.huber_fit`.

Clark (4 parameters): the residual ln(10) (a lN + b lE + c lN lE + d) - ln L (l = log10) is linear in
the parameters, so the summed Huber is convex: L-BFGS-B from the least-squares solution and a small
grid reaches the one optimum. Parameters the design cannot identify (a single E: b and c; N varying
at one E only: c) are held at 0 and reported as null.
The paper fits Krajewski's law with Huber delta = 0.1 (BFGS, weight decay 5e-4); here delta is
1e-3 on natural-log residuals like every scalelab law (`--delta` changes it).
"""

from __future__ import annotations

import itertools

import numpy as np

from scaling.core.huber import DELTA, huber, huber_grad
from scaling.core.multistart import MultiStartResult, multistart_lbfgsb

THETA = ("lg", "la", "lb", "lc", "alpha", "beta", "gamma")
GRID = {
    "lg": [0.0, 5.0, 10.0, 15.0, 20.0, 25.0],
    "la": [0.0, 5.0, 10.0, 15.0, 20.0, 25.0],
    "lb": [0.0, 5.0, 10.0, 15.0, 20.0, 25.0],
    "lc": [-1.0, -0.5, 0.0, 0.5, 1.0],
    "alpha": [0.0, 0.5, 1.0, 1.5, 2.0],
    "beta": [0.0, 0.5, 1.0, 1.5, 2.0],
    "gamma": [0.0, 0.5, 1.0, 1.5],
}
# Wide boxes (exp() stays finite; a bound hit is warned). gamma may go negative: finer experts worse.
BOUNDS = {
    "lg": (-30.0, 80.0),
    "la": (-30.0, 80.0),
    "lb": (-30.0, 80.0),
    "lc": (-10.0, 5.0),
    "alpha": (0.0, 5.0),
    "beta": (0.0, 5.0),
    "gamma": (-2.0, 5.0),
}
CHUNK = 8192  # grid rows evaluated at once (memory: CHUNK x points)


def start_grid() -> np.ndarray:
    return np.array(list(itertools.product(*(GRID[k] for k in THETA))), dtype=float)


def _lse2(x, y):
    return np.logaddexp(x, y)


class KrajewskiObjective:
    """Sum of Huber(log residuals) of the Krajewski law; f(theta) -> (value, gradient)."""

    def __init__(self, N, D, G, L, delta: float = DELTA):
        self.lN, self.lD, self.lG = (np.log(np.asarray(v, dtype=float)) for v in (N, D, G))
        self.lL = np.log(np.asarray(L, dtype=float))
        self.delta = delta

    def _parts(self, th):
        lg, la, lb, lc, alpha, beta, gamma = th
        tg = lg - gamma * self.lG
        u = _lse2(tg, la)  # log(g / G^gamma + a)
        t1, t2 = u - alpha * self.lN, lb - beta * self.lD
        m = np.maximum(np.maximum(t1, t2), lc)
        w1, w2, w3 = np.exp(t1 - m), np.exp(t2 - m), np.exp(lc - m)
        s = w1 + w2 + w3
        return tg, u, m, w1 / s, w2 / s, w3 / s, s

    def residuals(self, th) -> np.ndarray:
        lg, la, lb, lc, alpha, beta, gamma = th
        u = _lse2(lg - gamma * self.lG, la)
        return _lse2(_lse2(u - alpha * self.lN, lb - beta * self.lD), lc) - self.lL

    def jacobian(self, th) -> np.ndarray:
        tg, u, _, p1, p2, p3, _ = self._parts(th)
        q = np.exp(tg - u)  # share of g / G^gamma in the N coefficient
        return np.column_stack([p1 * q, p1 * (1 - q), p2, p3, -p1 * self.lN, -p2 * self.lD, -p1 * q * self.lG])

    def __call__(self, th) -> tuple[float, np.ndarray]:
        # One pass for value and gradient (L-BFGS-B calls this ~1,000 times per start): the softmax
        # weights give the residual (m + log s) and, summed against huber'(r) / s, the gradient, without
        # the n x 7 Jacobian. Same numbers as residuals()/jacobian() up to rounding, 3x faster.
        lg, la, lb, lc, alpha, beta, gamma = th
        tg = lg - gamma * self.lG
        u = _lse2(tg, la)
        t1, t2 = u - alpha * self.lN, lb - beta * self.lD
        m = np.maximum(np.maximum(t1, t2), lc)
        w1, w2, w3 = np.exp(t1 - m), np.exp(t2 - m), np.exp(lc - m)
        s = w1 + w2 + w3
        r = m + np.log(s) - self.lL
        g = huber_grad(r, self.delta) / s
        g1, g2 = g * w1, g * w2
        g1q = g1 * np.exp(tg - u)  # the g / G^gamma share of the N coefficient
        s1, s1q = g1.sum(), g1q.sum()
        grad = np.array([s1q, s1 - s1q, g2.sum(), (g * w3).sum(), -(g1 @ self.lN), -(g2 @ self.lD), -(g1q @ self.lG)])
        return float(huber(r, self.delta).sum()), grad

    def batch(self, thetas: np.ndarray) -> np.ndarray:
        """Objective at many parameter vectors (rows), in chunks."""
        out = []
        for i in range(0, len(thetas), CHUNK):
            th = thetas[i : i + CHUNK]
            u = _lse2(th[:, 0:1] - th[:, 6:7] * self.lG[None, :], th[:, 1:2])
            r = (
                _lse2(_lse2(u - th[:, 4:5] * self.lN[None, :], th[:, 2:3] - th[:, 5:6] * self.lD[None, :]), th[:, 3:4])
                - self.lL[None, :]
            )
            out.append(huber(r, self.delta).sum(axis=1))
        return np.concatenate(out)


def fit_krajewski(
    N, D, G, L, *, top_k: int = 32, delta: float = DELTA, starts: np.ndarray | None = None, extra_starts=()
) -> MultiStartResult:
    """Best theta (THETA order): L-BFGS-B from the `top_k` best grid points (`starts`: run all of
    them instead) plus `extra_starts`, then one polishing restart from the best point."""
    obj = KrajewskiObjective(N, D, G, L, delta)
    bounds = [BOUNDS[k] for k in THETA]
    pts = start_grid() if starts is None else np.atleast_2d(starts)
    res = multistart_lbfgsb(
        obj, pts, bounds, top_k=top_k if starts is None else None, batch_objective=obj.batch, extra_starts=extra_starts
    )
    again = multistart_lbfgsb(obj, res.x[None, :], bounds, top_k=None)
    if again.fun < res.fun:
        res.x, res.fun, res.nit = again.x, again.fun, res.nit + again.nit
    return res


def krajewski_params(th) -> dict[str, float]:
    lg, la, lb, lc, alpha, beta, gamma = (float(v) for v in th)
    return {
        "c": float(np.exp(lc)),
        "g": float(np.exp(lg)),
        "gamma": gamma,
        "a": float(np.exp(la)),
        "alpha": alpha,
        "b": float(np.exp(lb)),
        "beta": beta,
    }


def chinchilla_as_krajewski(params: dict) -> dict:
    """A Chinchilla fit (single granularity) in Krajewski's names: g = 0, gamma not identified."""
    return {
        "c": params["E"],
        "g": 0.0,
        "gamma": None,
        "a": params["A"],
        "alpha": params["alpha"],
        "b": params["B"],
        "beta": params["beta"],
    }


# ---------------------------------------------------------------- Clark
CLARK_COLUMNS = ("a", "b", "c", "d")
LN10 = float(np.log(10.0))


def clark_design(N, E) -> np.ndarray:
    lN, lE = np.log10(np.asarray(N, dtype=float)), np.log10(np.asarray(E, dtype=float))
    return np.column_stack([lN, lE, lN * lE, np.ones_like(lN)])


def clark_free(N, E) -> tuple[str, ...]:
    """The parameters the design identifies: a and d always; b with 2+ distinct E; c when the
    full design has full rank (N varies at 2+ expert counts)."""
    X = clark_design(N, E)
    if np.unique(np.round(X[:, 1], 9)).size < 2:
        return ("a", "d")
    if np.linalg.matrix_rank(X) < 4:
        return ("a", "b", "d")
    return CLARK_COLUMNS


class ClarkObjective:
    """Summed Huber of natural-log residuals ln(10) X theta - ln L over the free columns."""

    def __init__(self, N, E, L, free: tuple[str, ...], delta: float = DELTA):
        self.X = clark_design(N, E)[:, [CLARK_COLUMNS.index(k) for k in free]] * LN10
        self.lL = np.log(np.asarray(L, dtype=float))
        self.delta = delta

    def residuals(self, th) -> np.ndarray:
        return self.X @ np.asarray(th, dtype=float) - self.lL

    def __call__(self, th) -> tuple[float, np.ndarray]:
        r = self.residuals(th)
        return float(huber(r, self.delta).sum()), self.X.T @ huber_grad(r, self.delta)

    def batch(self, thetas: np.ndarray) -> np.ndarray:
        return huber(np.atleast_2d(thetas) @ self.X.T - self.lL[None, :], self.delta).sum(axis=1)


def fit_clark(N, E, L, free: tuple[str, ...], *, delta: float = DELTA, extra_starts=()) -> MultiStartResult:
    """The convex fit (a Huber sum of an affine map): the least-squares start plus the two best points of a
    3^k grid around typical values. Every start converges to the one optimum, so more starts only cost time
    (each bootstrap resample refits)."""
    obj = ClarkObjective(N, E, L, free, delta)
    ls, *_ = np.linalg.lstsq(obj.X, obj.lL, rcond=None)
    typical = {"a": [-0.2, -0.05, 0.0], "b": [-0.2, -0.05, 0.0], "c": [-0.02, 0.0, 0.02], "d": [0.0, 1.0, 2.0]}
    grid = np.array(list(itertools.product(*(typical[k] for k in free))), dtype=float)
    bounds = [(-50.0, 50.0)] * len(free)
    return multistart_lbfgsb(obj, grid, bounds, top_k=2, batch_objective=obj.batch, extra_starts=[ls, *extra_starts])


def clark_params(th, free: tuple[str, ...]) -> dict:
    vals = dict(zip(free, (float(v) for v in th)))
    return {k: vals.get(k) for k in CLARK_COLUMNS}
