"""`study next` for a data-constrained (Muennighoff et al. 2023) fit: the law's own parameters and
its optimum with the study's unique tokens, so the design sees what repeated data costs.

θ = (log A, log B, log E, α, β, log R_D*[, log R_N*]); a run at (N, D) draws from U = min(D, unique)
unique tokens, as the fitted runs did. Gradients of log L are central differences of the law's
predict; the targets (log N_opt, log L_opt at the target with `unique` tokens) come from
`scaling.laws.allocation.allocate` on a grid, so their differences take a wider step (STEP) than the
closed-form Chinchilla targets' (its parabolic refinement is smooth only on that scale).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scaling.core.conventions import TokenCost
from scaling.core.errors import InputError
from scaling.laws.allocation import allocate

KEYS = ("A", "B", "E", "alpha", "beta", "R_D_star", "R_N_star")
LOGGED = {"A", "B", "E", "R_D_star", "R_N_star"}
STEP = 1e-3


def keys_of(rec) -> tuple[str, ...]:
    s = (rec.get("bootstrap") or {}).get("samples") or {}
    keys = tuple(k for k in KEYS if k in s)
    if keys[:6] != KEYS[:6]:
        raise InputError(
            "study next: the data-constrained fit keeps no bootstrap samples of E, A, B, alpha, beta, R_D_star "
            "(fit chinchilla --law data-constrained --bootstrap 100)"
        )
    return keys


def theta_draws(rec, min_draws: int) -> np.ndarray:
    s = rec["bootstrap"]["samples"]
    keys = keys_of(rec)
    n = min(len(s[k]) for k in keys)
    arr = np.array([[np.nan if v is None else v for v in s[k][:n]] for k in keys], dtype=float).T
    with np.errstate(all="ignore"):
        th = np.column_stack([np.log(arr[:, i]) if k in LOGGED else arr[:, i] for i, k in enumerate(keys)])
    th = th[np.all(np.isfinite(th), axis=1)]
    if len(th) < min_draws:
        raise InputError(f"study next: the fit has {len(th)} usable bootstrap laws (need >= {min_draws})")
    return th


def theta_of(rec) -> np.ndarray:
    p = rec["params"]
    return np.array([np.log(p[k]) if k in LOGGED else p[k] for k in keys_of(rec)], dtype=float)


def law_of(th: np.ndarray, keys):
    """The law of each row of th as one DataConstrainedLaw with (S,) parameters."""
    return _law(th, keys, False)


def _law(th: np.ndarray, keys, col: bool):
    """The laws of the rows of th as one DataConstrainedLaw with (S, 1) (col) or (S,) parameters."""
    from scaling.laws.loss import DataConstrainedLaw  # deferred: scipy

    p: dict[str, Any] = {k: (np.exp(th[:, i]) if k in LOGGED else th[:, i]) for i, k in enumerate(keys)}
    return DataConstrainedLaw(**{k: v[:, None] if col else v for k, v in p.items()})


def log_loss(th: np.ndarray, keys, N, D, unique: float) -> np.ndarray:
    N, D = np.asarray(N, float)[None, :], np.asarray(D, float)[None, :]
    with np.errstate(all="ignore"):
        return np.log(_law(th, keys, True).predict(N, D, U=np.minimum(D, unique)))


def log_loss_grad(th: np.ndarray, keys, N, D, unique: float, h: float = 1e-5) -> np.ndarray:
    """∂ log L(N, D, U = min(D, unique)) / ∂θ: (S, M, P)."""
    out = np.empty((th.shape[0], len(np.atleast_1d(N)), th.shape[1]))
    for k in range(th.shape[1]):
        e = np.zeros(th.shape[1])
        e[k] = h
        out[:, :, k] = (log_loss(th + e, keys, N, D, unique) - log_loss(th - e, keys, N, D, unique)) / (2 * h)
    return out


def targets(th: np.ndarray, keys, C6: float, unique: float, n_range) -> np.ndarray:
    """(log N_opt, log L_opt) at compute C6 = 6 N D with `unique` unique tokens: (S, 2)."""
    law = _law(th, keys, True)
    with np.errstate(all="ignore"):
        n, d = allocate(
            lambda N, D: law.predict(N, D, U=np.minimum(D, unique)), C6, TokenCost("6ND_total", "total"), n_range
        )
        loss = _law(th, keys, False).predict(n, d, U=np.minimum(d, unique))
        return np.column_stack([np.log(n), np.log(loss)])


def target_grad(th: np.ndarray, keys, C6: float, unique: float, n_range) -> np.ndarray:
    out = np.empty((th.shape[0], 2, th.shape[1]))
    for k in range(th.shape[1]):
        e = np.zeros(th.shape[1])
        e[k] = STEP
        out[:, :, k] = (targets(th + e, keys, C6, unique, n_range) - targets(th - e, keys, C6, unique, n_range)) / (
            2 * STEP
        )
    return np.where(np.isfinite(out), out, 0.0)
