"""What a study's intervals will be after proposed runs, by simulation and refit (a preposterior
forecast), rather than by the linearised Fisher update of `scaling.planning.information`.

For each of K simulated futures: draw a law θ_k from the fit's bootstrap laws (the laws today's runs
still allow), draw the proposed runs' outcomes from θ_k plus noise resampled from the fit's residuals,
refit the law on today's runs and the simulated ones (the residuals rescaled by sqrt(n / (n - P)):
a fit's residuals scatter less than its noise), and bootstrap that refit the way the fit does
(resample all rows with replacement, refit each resample, percentile interval). The forecast width of
each target is the mean over futures of its interval's width; today's width is measured with the same
number of resamples (the mean over random subsets of the fit's own bootstrap laws), so the ratio
after/today does not depend on how many resamples either side used. Where the law is not identified
(an exponent running to its bound, an optimum that moves with every resample) the refits say so and
the Fisher update cannot: it is exact only for a linear model with Gaussian noise.

`preposterior` is the generic loop (any model with a refit and a resample refit); `chinchilla_model`
adapts it to approach 3's Huber fit (scaling.fits.chinchilla.huber_fit) in θ = (log A, log B, log E,
α, β), with N_opt and the loss at the optimum measured as the plan measures them (`optimum_targets`).
`data_constrained_model` adapts it to the data-constrained fit (scaling.fits.chinchilla.data_constrained).
Calibration against a known truth: benchmarks/next_runs.py calibration (docs/scaling-laws.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

SUBSETS = 32  # random subsets of today's bootstrap laws that measure today's width at the forecast's resamples


@dataclass
class Forecast:
    """Interval widths per target: `today` (T,), `after` (K, T) per simulated future; widths are
    hi - lo of each target's percentile interval (targets in log: log(hi/lo))."""

    today: np.ndarray
    after: np.ndarray
    futures: int
    resamples: int
    seconds: float
    failed: int = 0
    # per target: the share of today's bootstrap laws, and of the simulated refits' resamples (mean over
    # futures), where the target is undefined (nan: e.g. no optimum inside the plan's range). The widths
    # cover only the rest, so a large share means the width forecast speaks for a minority of the laws.
    undefined_today: np.ndarray | None = None
    undefined_after: np.ndarray | None = None

    def width_ratio(self) -> np.ndarray:
        """Per target: the expected width after the runs over today's (1.0: no narrowing)."""
        with np.errstate(all="ignore"):
            return np.nanmean(self.after, axis=0) / self.today


def percentile_width(samples: np.ndarray, ci: float) -> np.ndarray:
    """hi - lo of the central `ci` percentile interval of each column of samples (R, T); nan-robust."""
    q = 100 * (1 - ci) / 2
    with np.errstate(all="ignore"):
        s = np.where(np.isfinite(samples), samples, np.nan)
        return np.nanpercentile(s, 100 - q, axis=0) - np.nanpercentile(s, q, axis=0)


def today_width(target_draws: np.ndarray, resamples: int, ci: float, rng) -> np.ndarray:
    """Today's width measured as the forecast measures its own: the mean percentile width over
    SUBSETS random subsets of `resamples` of today's bootstrap targets (R, T)."""
    R = len(target_draws)
    if resamples >= R:
        return percentile_width(target_draws, ci)
    w = [percentile_width(target_draws[rng.choice(R, resamples, replace=False)], ci) for _ in range(SUBSETS)]
    return np.nanmean(w, axis=0)


@dataclass
class Model:
    """What `preposterior` needs of a law and its fit. X rows are runs; y the fitted observable.

    predict(θ, X) -> mean y; refit(X, y, starts) -> (θ̂, resample_fit): the fit's point estimate on
    all rows (warm-started at `starts` besides the fit's own starts) and the function that refits one
    bootstrap resample (row indices) as the fit's bootstrap does; targets(Θ (R, P)) -> (R, T)."""

    predict: Callable[[np.ndarray, np.ndarray], np.ndarray]
    refit: Callable[[np.ndarray, np.ndarray, list], tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]]
    targets: Callable[[np.ndarray], np.ndarray]


def preposterior(
    model: Model,
    X_old: np.ndarray,
    y_old: np.ndarray,
    X_new: np.ndarray,
    draws: np.ndarray,
    point: np.ndarray,
    residuals: np.ndarray,
    *,
    futures: int = 8,
    resamples: int = 40,
    ci: float = 0.95,
    seed: int = 0,
) -> Forecast:
    """The expected percentile widths of `model.targets` after observing runs at X_new.

    draws (S, P): today's bootstrap laws (the futures' truths, and today's width); point (P,): today's
    fit; residuals: today's fit's residuals in y (the noise each simulated run gets, resampled)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    X_old, X_new = np.atleast_2d(X_old), np.atleast_2d(X_new)
    X = np.concatenate([X_old, X_new])
    n = len(X)
    residuals = np.asarray(residuals, float)
    residuals = residuals[np.isfinite(residuals)]
    # a fit's residuals scatter less than its noise (P parameters absorb some): rescale by sqrt(n / (n - P))
    residuals = residuals * np.sqrt(len(residuals) / max(len(residuals) - len(point), 1))
    today_targets = model.targets(draws)
    today = today_width(today_targets, resamples, ci, rng)
    after = np.full((futures, today.size), np.nan)
    undefined = np.full((futures, today.size), np.nan)
    failed = 0
    for k in range(futures):
        th_k = draws[rng.integers(len(draws))]
        y_new = model.predict(th_k, X_new) + rng.choice(residuals, len(X_new))
        y = np.concatenate([y_old, y_new])
        try:
            _, resample_fit = model.refit(X, y, [point, th_k])
        except Exception:  # noqa: BLE001 - a future whose refit fails counts as failed, not as a width
            failed += 1
            continue
        thetas = []
        for _ in range(resamples):
            try:
                thetas.append(resample_fit(rng.integers(0, n, n)))
            except Exception:  # noqa: BLE001 - as the fit's own bootstrap: a failed resample is left out
                failed += 1
        if len(thetas) >= max(3, resamples // 2):
            targets = model.targets(np.array(thetas))
            after[k] = percentile_width(targets, ci)
            undefined[k] = np.mean(~np.isfinite(targets), axis=0)
    with np.errstate(all="ignore"):
        undefined_after = np.nanmean(undefined, axis=0)
    return Forecast(
        today,
        after,
        futures,
        resamples,
        time.perf_counter() - t0,
        failed,
        np.mean(~np.isfinite(today_targets), axis=0),
        undefined_after,
    )


# ---------------------------------------------------------------- approach 3 (summed Huber on log loss)
FORECAST_OPTIONS = {
    "ftol": 1e-12,
    "gtol": 1e-8,
    "maxiter": 300,
    "maxfun": 1000,
    "maxls": 20,
}  # widths, not optima to machine precision


def chinchilla_model(C6: float, delta: float, n_range, top_k: int = 2, boot_top_k: int = 0) -> Model:
    """Approach 3's law and fit: X = (log N, log D), y = log loss, θ = (log A, log B, log E, α, β),
    on the fit's objective (summed Huber with its δ) and bounds. The point refit starts from the
    `top_k` best points of the paper's grid plus today's optimum and the future's law; each resample
    from the refit's optimum plus the full data's `boot_top_k` best grid points. The fit's own
    bootstrap adds 2 grid points (`boot_top_k=2`); the default leaves them out: from the grid L-BFGS-B
    takes hundreds of iterations where an exponent is not identified, ~50x the cost, and on the
    scaled-down main job they moved the forecast from x0.75/x0.62 (N_opt/loss) to x0.83/x0.43 against
    x1.18/x0.385 measured (2 futures: within the forecast's noise on N_opt, closer on the loss).
    L-BFGS-B stops at FORECAST_OPTIONS' tolerances (the fit's are tighter: it reports optima, this a
    width). N_opt and the loss at the optimum are measured as the plan measures them (optimum_targets)."""
    from scaling.core.multistart import multistart_lbfgsb  # deferred: scipy
    from scaling.fits.chinchilla.huber_fit import BOUNDS, THETA, Objective, paper_grid

    bounds = [BOUNDS[k] for k in THETA]
    grid = paper_grid()

    def predict(th, X):
        la, lb, le, al, be = th
        return np.logaddexp(np.logaddexp(la - al * X[:, 0], lb - be * X[:, 1]), le)

    def objective(X, y):
        return Objective(np.exp(X[:, 0]), np.exp(X[:, 1]), np.exp(y), delta)

    def refit(X, y, starts):
        obj = objective(X, y)
        ranked = grid[np.argsort(obj.batch(grid), kind="stable")]
        th_hat = multistart_lbfgsb(
            obj, ranked[:top_k], bounds, top_k=None, extra_starts=starts, options=FORECAST_OPTIONS
        ).x
        boot_starts = ranked[:boot_top_k]

        def resample_fit(idx):
            o = objective(X[idx], y[idx])
            return multistart_lbfgsb(
                o, boot_starts, bounds, top_k=None, extra_starts=[th_hat], options=FORECAST_OPTIONS
            ).x

        return th_hat, resample_fit

    return Model(predict, refit, lambda th: optimum_targets(th, C6, n_range))


def optimum_targets(th: np.ndarray, C6: float, n_range) -> np.ndarray:
    """(log N_opt, log L_opt) at C6 = 6 N D as the plan measures them (scaling.laws.allocation.allocate
    within `n_range`): a law with no optimum inside the range is nan, left out of the interval, as
    the plan leaves it out; the closed form would put it at any N, however far."""
    from scaling.core.conventions import TokenCost
    from scaling.laws.allocation import allocate
    from scaling.laws.loss import ChinchillaLaw

    col: dict[str, Any] = {k: v[:, None] for k, v in _params(th).items()}
    law = ChinchillaLaw(**col)
    with np.errstate(all="ignore"):
        n, d = allocate(law.predict, C6, TokenCost("6ND_total", "total"), n_range)
        flat = ChinchillaLaw(**_params(th))
        return np.column_stack([np.log(n), np.log(flat.predict(n, d))])


def _params(th: np.ndarray) -> dict[str, Any]:
    """θ rows (log A, log B, log E, α, β) -> the law's parameters as (S,) arrays."""
    return {"A": np.exp(th[:, 0]), "B": np.exp(th[:, 1]), "E": np.exp(th[:, 2]), "alpha": th[:, 3], "beta": th[:, 4]}


# ---------------------------------------------------------------- the data-constrained law (Muennighoff et al.)
def data_constrained_model(C6: float, delta: float, n_range, unique: float, keys, top_k: int = 1) -> Model:
    """`fit chinchilla --law data-constrained`'s law and fit: X = (log N, log D, log U) (U the unique
    tokens each run drew from), y = log loss, θ = (log A, log B, log E, α, β, log R_D*[, log R_N*])
    (`keys`: scaling.planning.constrained_design.keys_of), on the fit's objective (summed Huber with its
    δ) and bounds. The point refit starts from the `top_k` best points of the fit's start grid plus
    today's optimum and the future's law; each resample from the refit's optimum alone (as
    chinchilla_model's default: the grid's starts cost ~50x where an exponent is not identified).
    Targets: (log N_opt, log L_opt) at C6 with `unique` unique tokens, as the design measures them
    (constrained_design.targets, within `n_range`)."""
    from scaling.core.multistart import multistart_lbfgsb  # deferred: scipy
    from scaling.fits.chinchilla.data_constrained import BOUNDS, THETA, Objective, start_grid
    from scaling.planning import constrained_design as cd

    terms = "data+params" if "R_N_star" in keys else "data"
    bounds = [BOUNDS[k] for k in THETA[terms]]
    grid = start_grid(terms)
    none = np.empty((0, len(bounds)))

    def predict(th, X):
        N, D, U = np.exp(X[:, 0]), np.exp(X[:, 1]), np.exp(X[:, 2])
        with np.errstate(all="ignore"):
            return np.log(cd.law_of(np.atleast_2d(th), keys).predict(N, D, U=np.minimum(D, U))).ravel()

    def objective(X, y):
        return Objective(np.exp(X[:, 0]), np.exp(X[:, 1]), np.exp(X[:, 2]), np.exp(y), delta, terms)

    def refit(X, y, starts):
        obj = objective(X, y)
        ranked = grid[np.argsort(obj.batch(grid), kind="stable")[:top_k]] if top_k else none
        th_hat = multistart_lbfgsb(obj, ranked, bounds, top_k=None, extra_starts=starts, options=FORECAST_OPTIONS).x

        def resample_fit(idx):
            o = objective(X[idx], y[idx])
            return multistart_lbfgsb(o, none, bounds, top_k=None, extra_starts=[th_hat], options=FORECAST_OPTIONS).x

        return th_hat, resample_fit

    return Model(predict, refit, lambda th: cd.targets(th, keys, C6, unique, n_range))
