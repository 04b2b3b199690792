"""Which new runs most shrink a law's uncertainty about chosen quantities, per FLOP (greedy
c-optimal experimental design with a Fisher-information update).

The state of knowledge is a covariance of the law's parameters (one per draw s of the parameters at
which gradients are taken; `scaling.planning.next_runs` starts every draw from the fit's bootstrap
covariance). A run at x observes y(x) = f(x; θ) + ε with Var ε = σ² (for a loss law: log loss, σ the
fit's residual scatter), which adds the Fisher information ∇f ∇fᵀ / σ². The targets are smooth
functions g_t(θ) (log N_opt and log loss at a budget); under the delta method Var g_t = ∇g_tᵀ Σ ∇g_t,
and one run updates Σ by Sherman-Morrison, so the variance a run would remove is in closed form:

    ΔV_t(x) = (∇g_tᵀ Σ ∇f(x))² / (σ² + ∇f(x)ᵀ Σ ∇f(x)).

The criterion is the mean over draws and targets of V_t / V_t(today) (a weighted mean when the
targets are given weights: `study next --target`): each target weighs the same whatever its units,
and averaging over draws designs for the laws the data still allow rather than for the point
estimate alone (a pseudo-Bayesian design). `greedy` picks, one at a time, the
affordable candidate with the largest reduction per FLOP (per run, once the run count rather than
the budget binds), updates Σ, and repeats within the budget and the run count; each candidate once
(a menu row is one run). The information a run adds does not depend on the loss it will measure, so
the whole batch can be chosen before any of it trains.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Design:
    """The chosen candidates (indices, in pick order), their cost, and the targets' variances:
    `before`, `after` (S, T) per draw; `steps`: the criterion after each pick (1.0 = today)."""

    chosen: list[int]
    spent: float
    before: np.ndarray
    after: np.ndarray
    steps: list[float]

    def width_ratio(self) -> np.ndarray:
        """Per target: the factor its interval's width shrinks by, sqrt(mean_s V_after / V_before)."""
        with np.errstate(all="ignore"):
            r = np.nanmean(self.after / self.before, axis=0)
        return np.sqrt(np.clip(r, 0.0, None))


def target_variance(cov: np.ndarray, G: np.ndarray) -> np.ndarray:
    """Var g_t = ∇g_tᵀ Σ ∇g_t per draw and target: cov (S, P, P), G (S, T, P) -> (S, T)."""
    return np.einsum("stp,spq,stq->st", G, cov, G)


def gains(
    cov: np.ndarray, F: np.ndarray, G: np.ndarray, sigma: float, base: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """Criterion reduction of each candidate: mean over draws of Σ_t w_t ΔV_t / base_t (w_t = 1 by
    default). cov (S, P, P), F (S, M, P) candidates' gradients, G (S, T, P) targets' gradients, base
    (S, T), weights (T,) -> (M,)."""
    u = np.einsum("spq,smq->smp", cov, F)  # Σ ∇f
    denom = sigma**2 + np.einsum("smp,smp->sm", F, u)
    proj = np.einsum("stp,smp->stm", G, u)  # ∇gᵀ Σ ∇f
    with np.errstate(all="ignore"):
        red = proj**2 / denom[:, None, :] / base[:, :, None]
        red = np.where(np.isfinite(red), red, 0.0)
    w = np.ones(G.shape[1]) if weights is None else np.asarray(weights, float)
    return np.einsum("stm,t->sm", red, w).mean(axis=0)


def update(cov: np.ndarray, f: np.ndarray, sigma: float) -> np.ndarray:
    """Σ after observing one run with gradient f (S, P): Sherman-Morrison."""
    u = np.einsum("spq,sq->sp", cov, f)
    denom = sigma**2 + np.einsum("sp,sp->s", f, u)
    return cov - np.einsum("sp,sq->spq", u, u) / denom[:, None, None]


def _share(cost: np.ndarray, budget_left: float, runs_left: int) -> np.ndarray:
    """What a run uses of what is left: its FLOPs' share of the remaining budget or one of the remaining
    runs, whichever is larger. Per FLOP while FLOPs bind; per run once the run count binds (otherwise
    a cap of K runs fills with the cheapest runs and leaves most of the budget unspent)."""
    frac = cost / budget_left if np.isfinite(budget_left) else np.zeros_like(cost)
    return np.maximum(frac, 1.0 / max(runs_left, 1))


def greedy(
    cov0: np.ndarray,
    F: np.ndarray,
    G: np.ndarray,
    cost: np.ndarray,
    *,
    sigma: float,
    budget: float = np.inf,
    max_runs: int = 10,
    min_gain: float = 1e-6,
    conflicts: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> Design:
    """Pick up to `max_runs` candidates within `budget` (the sum of their `cost`), each the largest
    criterion reduction per share of what is left (`_share`: per FLOP while the budget binds) among
    those still affordable. cov0 (P, P) or (S, P, P). `conflicts` (M, M) boolean: a chosen candidate
    also rules out those it conflicts with (e.g. compute groups too close to be told apart). `weights`
    (T,): each target's weight in the criterion (default equal; a weighted mean of V_t / V_t(today))."""
    S, M, P = F.shape
    cov = np.broadcast_to(cov0, (S, P, P)).copy() if cov0.ndim == 2 else cov0.copy()
    cost = np.asarray(cost, dtype=float)
    before = target_variance(cov, G)
    base = np.where(before > 0, before, np.nan)
    free = np.isfinite(cost) & (cost > 0)
    w = np.ones(G.shape[1]) if weights is None else np.asarray(weights, float)
    if w.shape != (G.shape[1],) or np.any(w < 0) or (G.shape[1] and not w.sum() > 0):
        raise ValueError(f"weights: one non-negative weight per target, not all zero (got {weights})")
    chosen: list[int] = []
    steps: list[float] = []
    spent = 0.0
    while len(chosen) < max_runs:
        ok = free & (spent + cost <= budget * (1 + 1e-9))
        if not ok.any():
            break
        g = gains(cov, F, G, sigma, base, w) / (1.0 if G.shape[1] == 0 else w.sum())
        score = np.where(ok, g / _share(cost, budget - spent, max_runs - len(chosen)), -np.inf)
        m = int(np.argmax(score))
        if not g[m] > min_gain:
            break
        cov = update(cov, F[:, m, :], sigma)
        chosen.append(m)
        spent += float(cost[m])
        free[m] = False
        if conflicts is not None:
            free &= ~conflicts[m]
        with np.errstate(all="ignore"):
            steps.append(float(np.nansum(np.nanmean(target_variance(cov, G) / base, axis=0) * w) / w.sum()))
    return Design(chosen, spent, before, target_variance(cov, G), steps)
