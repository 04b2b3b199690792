"""Chinchilla Approach 3 by maximum likelihood (`--objective mle`, Epoch's headline estimate).

Same law and LSE parametrisation as `scaling.fits.chinchilla.huber_fit`; the objective is the likelihood of
`scaling.core.likelihood` (Huber-shaped density, free sigma). Starts: the summed-Huber optimum (itself
the best of a multi-start over the paper's grid) and the `grid_starts` grid points with the
smallest sum of absolute residuals, so a poor Huber basin cannot decide the answer alone.
"""

from __future__ import annotations

import numpy as np

from scaling.core.huber import DELTA
from scaling.core.likelihood import LOG_SIGMA_BOUNDS, MLEResult, fit_mle, rank_by_abs_residuals
from scaling.fits.chinchilla.huber_fit import BOUNDS, THETA, Objective, fit_theta, paper_grid

GRID_STARTS = 4


def fit_theta_mle(
    N,
    D,
    L,
    *,
    grid: str = "fast",
    top_k: int = 32,
    delta: float = DELTA,
    grid_starts: int = GRID_STARTS,
    extra_starts=(),
) -> tuple[MLEResult, object]:
    """(maximum-likelihood result, the summed-Huber result used as a start)."""
    obj = Objective(N, D, L, delta)
    huber_res = fit_theta(N, D, L, grid=grid, top_k=top_k, delta=delta)
    ranked = (
        rank_by_abs_residuals(obj.batch_residuals, paper_grid(), grid_starts)
        if grid_starts
        else np.empty((0, len(THETA)))
    )
    starts = [huber_res.x, *map(np.asarray, extra_starts), *ranked]
    labels = (
        ["summed-Huber optimum"]
        + [f"extra start {i}" for i in range(len(extra_starts))]
        + [f"grid point {i + 1} by sum |r|" for i in range(len(ranked))]
    )
    res = fit_mle(obj.residuals, obj.jacobian, starts, [BOUNDS[k] for k in THETA], delta=delta, labels=labels)
    return res, huber_res


def refit_mle(N, D, L, starts, *, delta: float = DELTA) -> MLEResult:
    """A bootstrap refit: maximum likelihood from the given starts only (no grid, no Huber fit)."""
    obj = Objective(N, D, L, delta)
    return fit_mle(obj.residuals, obj.jacobian, starts, [BOUNDS[k] for k in THETA], delta=delta)


def sigma_warnings(res: MLEResult) -> list[str]:
    """sigma -> 0 when the law passes through every point (too few or noise-free points): the
    likelihood is then unbounded and sigma is not identified, though the law's parameters are."""
    if res.log_sigma <= LOG_SIGMA_BOUNDS[0] + 1e-6 or res.sum_abs <= 1e-12:
        return [
            f"sigma not identified: the law passes through every point (sum |log residual| = {res.sum_abs:.3g}); "
            f"the likelihood grows without bound as sigma -> 0 (log sigma stopped at {res.log_sigma:.4g})"
        ]
    return []


MLE_BOOTSTRAP_METHOD = (
    "resample runs with replacement; each resample refits the maximum likelihood (law parameters and sigma), "
    "by least absolute deviations from the full-data MLE and summed-Huber optima, then the exact-likelihood polish; "
    "percentile intervals"
)
