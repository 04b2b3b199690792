"""Compute multiplier between two fitted Chinchilla laws at matched loss (`fit chinchilla --by`).

Each law's compute-optimal loss L*(C) = min_N L(N, C / k(N)) falls with C; its inverse C(L) is
the least compute that reaches loss L. The multiplier of `other` over `baseline` at loss L is
C_baseline(L) / C_other(L): > 1 means `other` reaches L with less compute. It is read at the loss
`other` reaches at a stated compute C_ref (so C_other(L) = C_ref): m(C_ref) = C_baseline(L*_other(C_ref)) / C_ref.

Under C = 6 N D with the law's own N the frontier has a closed form,
L*(C) = E + K (C/6)^-gamma, gamma = alpha beta / (alpha + beta), K = A G^-alpha + B G^beta,
so C(L) = 6 ((L - E) / K)^(-1/gamma). With equal exponents and E the multiplier is the same at
every scale (e.g. other = baseline with data worth k times more: B_other = B k^-beta gives
m = k exactly); when gamma differs it changes with C_ref, which is why it is reported at several
compute levels. Other conventions (trainer FLOPs, non-embedding N) are solved numerically.
A loss at or below the baseline's E is never reached by it: the multiplier is infinite there.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from scaling.core.bootstrap import interval
from scaling.core.conventions import TokenCost
from scaling.laws.allocation import allocate
from scaling.laws.loss import ChinchillaLaw

CORE = ("E", "A", "B", "alpha", "beta")
MAX_DECADES = 30  # C(L) is searched this many decades either side of the reference compute


def loss_exponent(p: dict) -> float:
    """gamma = alpha beta / (alpha + beta): L*(C) - E ~ C^-gamma."""
    return p["alpha"] * p["beta"] / (p["alpha"] + p["beta"])


def optimal_loss(p: dict, C: float, cost: TokenCost, n_range) -> float:
    law = ChinchillaLaw(**{k: p[k] for k in CORE})
    if cost.exact:
        return float(law.optimal_loss(C))
    n, d = allocate(law.predict, float(C), cost, n_range)
    return float(law.predict(n, d))


def compute_for_loss(p: dict, L: float, cost: TokenCost, n_range, c_ref: float) -> float:
    """The least compute reaching loss L on the law's compute-optimal frontier (inf: never)."""
    if not np.isfinite(L) or L <= p["E"]:
        return float("inf")
    if cost.exact:
        law = ChinchillaLaw(**{k: p[k] for k in CORE})
        n, d = law.compute_optimal(6.0)  # C/6 = 1: K = L*(6) - E
        K = float(law.predict(n, d)) - p["E"]
        return float(6.0 * ((L - p["E"]) / K) ** (-1.0 / loss_exponent(p)))
    f = lambda lc: optimal_loss(p, float(np.exp(lc)), cost, n_range) - L  # noqa: E731
    # walk from c_ref by decades toward the root (loss falls with compute), then bisect that decade
    a = np.log(c_ref)
    fa = f(a)
    if not np.isfinite(fa):
        return float("nan")  # no interior optimum at the reference compute: no answer, not a number
    step = np.log(10.0) * (1 if fa > 0 else -1)
    for _ in range(MAX_DECADES):
        b = a + step
        fb = f(b)
        if not np.isfinite(fb):
            return float("inf") if step > 0 and fa > 0 and p["E"] < L else float("nan")
        if (fa > 0) != (fb > 0):
            lo, hi = sorted((a, b))
            return float(np.exp(brentq(f, lo, hi, xtol=1e-10)))
        a, fa = b, fb
    return float("inf") if step > 0 else float("nan")


def multiplier(
    base: dict, other: dict, c_ref: float, base_cost: TokenCost, other_cost: TokenCost, base_range, other_range
) -> tuple[float, float]:
    """(m, L): the loss L other reaches at c_ref and C_baseline(L) / c_ref."""
    L = optimal_loss(other, c_ref, other_cost, other_range)
    return compute_for_loss(base, L, base_cost, base_range, c_ref) / c_ref, L


def draws(samples: dict | None) -> list[dict]:
    """Bootstrap samples {name: [values]} as one parameter dict per resample."""
    if not samples or any(k not in samples for k in CORE):
        return []
    n = min(len(samples[k]) for k in CORE)
    return [{k: float(samples[k][i]) for k in CORE} for i in range(n)]


def draw_interval(values, ci: float) -> tuple[list | None, int]:
    """Percentile interval of multiplier draws, infinite ones (never reached) kept as +inf
    (an upper end of None in the record means unbounded); NaN draws (no answer) are left out.
    Returns (interval or None with fewer than 2 draws, number of infinite draws)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    n_inf = int(np.isinf(v).sum())
    if v.size < 2:
        return None, n_inf
    big = np.where(np.isinf(v), 1e300, v)  # percentiles of a list with +inf in it, without inf arithmetic
    lo, hi = interval(big, ci)  # finite, and at least 2 draws: never None
    return [lo if lo < 1e200 else None, hi if hi < 1e200 else None], n_inf
