"""`fit chinchilla --law data-constrained`: Muennighoff et al. 2023's law with repeated data.

    L(N, D, U) = E + A / N'^alpha + B / D'^beta
    D' = U + U R_D* (1 - exp(-R_D / R_D*)),  R_D = max(D/U - 1, 0)      (repeated tokens)
    N' = U_N + U_N R_N* (1 - exp(-R_N / R_N*)), R_N = max(N/U_N - 1, 0)  (excess parameters)
    U_N = min(N, the compute-optimal N for U tokens) = min(N, G (U G)^(beta/alpha))

U = unique tokens the run saw: min(the unique tokens available to it (its training split), D) -- a
run shorter than one epoch repeats nothing. G is the Chinchilla frontier's (alpha A / (beta B))^(1/(alpha+beta)).

terms='data+params' (default): the complete law, R_D_star and R_N_star fitted with E, A, B, alpha,
beta (seven parameters, jointly). terms='data': the data term only (N' = N, six parameters).
Parametrisation as Chinchilla's approach 3, plus r = log R_D*, s = log R_N*:
    log L_hat = LSE(a - alpha log N', b - beta log D', e).
Objectives as for approach 3: the summed Huber(delta) of log residuals (multi-start L-BFGS-B from
the paper's grid x a few R* values) or the Huber-density likelihood (`--objective mle`). The
record's `derived` optima use the runs' unique tokens when they share one data set (the frontier
of `DataConstrainedLaw.compute_optimal(C, U)`), and the fresh-data frontier beside them.
"""

from __future__ import annotations

import itertools
from functools import partial

import numpy as np

from scaling.core import bootstrap as bs
from scaling.core.conventions import TokenCost
from scaling.core.diagnostics import (
    at_bound,
    compute_grid,
    extrapolation_warning,
    huber_diagnostics,
    identification_warnings,
)
from scaling.core.errors import InputError
from scaling.core.huber import DELTA, huber, huber_grad
from scaling.core.likelihood import fit_mle, rank_by_abs_residuals
from scaling.core.multistart import multistart_lbfgsb
from scaling.fits import pipeline
from scaling.fits.chinchilla.huber_fit import BOUNDS as CH_BOUNDS
from scaling.fits.chinchilla.huber_fit import PAPER_GRID, theta_to_params
from scaling.fits.chinchilla.mle import GRID_STARTS, sigma_warnings
from scaling.fits.chinchilla.options import TERMS
from scaling.laws.allocation import allocate, optimal, search_range
from scaling.laws.loss import DataConstrainedLaw

# r = log R_D*, s = log R_N*
THETA = {"data": ("a", "b", "e", "alpha", "beta", "r"), "data+params": ("a", "b", "e", "alpha", "beta", "r", "s")}
BOUNDS = {
    **CH_BOUNDS,
    "alpha": (1e-4, 5.0),
    "beta": (1e-4, 5.0),
    "r": (float(np.log(0.01)), float(np.log(1e4))),
    "s": (float(np.log(0.01)), float(np.log(1e4))),
}
R_STAR_GRID = (1.0, 4.0, 16.0, 64.0)  # starting values of R_D_star, crossed with the paper's grid
R_N_STAR_GRID = (1.0, 5.0, 25.0)  # starting values of R_N_star (the complete law)
CORE = {
    "data": ("E", "A", "B", "alpha", "beta", "R_D_star"),
    "data+params": ("E", "A", "B", "alpha", "beta", "R_D_star", "R_N_star"),
}
FORM = {
    "data+params": "L = E + A/N'^alpha + B/D'^beta, D' = U + U R_D_star (1 - exp(-R_D/R_D_star)), "
    "N' = U_N + U_N R_N_star (1 - exp(-R_N/R_N_star)), U_N = min(N, G (U G)^(beta/alpha)), "
    "R_N = N/U_N - 1 (Muennighoff et al. 2023, complete law)",
    "data": "L = E + A/N^alpha + B/D'^beta, D' = U + U R_D_star (1 - exp(-(D/U - 1)/R_D_star)) "
    "(Muennighoff et al. 2023, data term only; N' = N)",
}
CHUNK = 4096  # grid rows ranked at once (keeps the vectorised ranking's memory small)


def start_grid(terms: str = "data+params") -> np.ndarray:
    """The paper's 4,500 starts crossed with R_STAR_GRID (and R_N_STAR_GRID): rows in THETA order."""
    g = PAPER_GRID
    extra = [np.log(R_STAR_GRID)] + ([np.log(R_N_STAR_GRID)] if terms == "data+params" else [])
    rows = itertools.product(g["a"], g["b"], g["e"], g["alpha"], g["beta"], *extra)
    return np.array(list(rows), dtype=float)


def _decay(reps, log_rstar):
    """q = R* (1 - exp(-R/R*)) (the extra effective multiples) and d log(1 + q) / d log R*."""
    rs = np.exp(log_rstar)
    decay = np.exp(-reps / rs)
    q = -rs * np.expm1(-reps / rs)
    return q, (q - reps * decay) / (1.0 + q), decay


class Objective:
    """Summed Huber of log residuals of the data-constrained law; f(theta) -> (value, gradient)."""

    def __init__(self, N, D, U, L, delta: float = DELTA, terms: str = "data+params"):
        U = np.minimum(np.asarray(U, dtype=float), np.asarray(D, dtype=float))
        self.logN = np.log(np.asarray(N, dtype=float))
        self.logU = np.log(U)
        self.reps = np.maximum(np.asarray(D, dtype=float) / U - 1.0, 0.0)
        self.logL = np.log(np.asarray(L, dtype=float))
        self.delta = delta
        self.terms = terms

    def _log_dprime(self, r):
        """log D' and d log D' / d r for r = log R_D* (broadcasts over a column of r values)."""
        q, dq, _ = _decay(self.reps, r)
        return self.logU + np.log1p(q), dq

    def _log_nprime(self, th):
        """log N', d log N'/d log N_U (0 without excess parameters), d log N'/d s, log N_U's K = alpha log N_U,
        for theta rows (broadcasts over a column of parameter values)."""
        a, b, alpha, beta, s = th[0], th[1], th[3], th[4], th[6]
        with np.errstate(all="ignore"):
            K = np.log(alpha) + a - np.log(beta) - b + beta * self.logU  # alpha log N_U
            m = K / alpha
            excess = self.logN > m
            reps = np.where(excess, np.expm1(np.where(excess, self.logN - m, 0.0)), 0.0)
            q, dq, decay = _decay(reps, s)
            ln = np.where(excess, m + np.log1p(q), self.logN)
            g = np.where(excess, 1.0 - (reps + 1.0) * decay / (1.0 + q), 0.0)
        return ln, g, np.where(excess, dq, 0.0), K

    def _terms(self, th):
        a, b, e, alpha, beta, r = th[:6]
        ld, dld = self._log_dprime(r)
        if self.terms == "data+params":
            ln, g, dln, K = self._log_nprime(th)
        else:
            ln, g, dln, K = self.logN, 0.0, 0.0, 0.0
        return a - alpha * ln, b - beta * ld, ln, ld, dld, g, dln, K

    def residuals(self, th: np.ndarray) -> np.ndarray:
        t1, t2, *_ = self._terms(th)
        return np.logaddexp(np.logaddexp(t1, t2), th[2]) - self.logL

    def jacobian(self, th: np.ndarray) -> np.ndarray:
        return self._residuals_and_jacobian(th)[1]

    def _residuals_and_jacobian(self, th: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Log residuals (m + log of the summed softmax weights: residuals() up to rounding) and d/d theta."""
        e, alpha, beta = th[2], th[3], th[4]
        t1, t2, ln, ld, dld, g, dln, K = self._terms(th)
        m = np.maximum(np.maximum(t1, t2), e)
        w1, w2, w3 = np.exp(t1 - m), np.exp(t2 - m), np.exp(e - m)
        tot = w1 + w2 + w3
        p1, p2 = w1 / tot, w2 / tot
        # d log N' / d theta through log N_U = K / alpha (zero without excess parameters)
        cols = [
            p1 * (1.0 - g),
            p2 + p1 * g,
            w3 / tot,
            -p1 * (ln + g * (1.0 - K) / alpha),
            -p2 * ld - p1 * g * (self.logU - 1.0 / beta),
            -beta * p2 * dld,
        ]
        if self.terms == "data+params":
            cols.append(-alpha * p1 * dln)
        return m + np.log(tot) - self.logL, np.column_stack(cols)

    def __call__(self, th: np.ndarray) -> tuple[float, np.ndarray]:
        # one pass through _terms for value and gradient (L-BFGS-B calls this ~1,000 times per start)
        res, jac = self._residuals_and_jacobian(th)
        return float(huber(res, self.delta).sum()), jac.T @ huber_grad(res, self.delta)

    def batch_residuals(self, thetas: np.ndarray) -> np.ndarray:
        th = np.atleast_2d(thetas)
        out = np.empty((th.shape[0], self.logL.size))
        with np.errstate(all="ignore"):  # grid corners (alpha, beta near 0) give non-finite values: ranked last
            for i in range(0, th.shape[0], CHUNK):
                cols = [c[:, None] for c in th[i : i + CHUNK].T]
                t1, t2, *_ = self._terms(cols)
                out[i : i + CHUNK] = np.logaddexp(np.logaddexp(t1, t2), cols[2]) - self.logL[None, :]
        return out

    def batch(self, thetas: np.ndarray) -> np.ndarray:
        return huber(self.batch_residuals(thetas), self.delta).sum(axis=1)

    def n_excess(self, th: np.ndarray) -> int:
        """Runs with more parameters than the compute-optimal N for their unique tokens (N > U_N)."""
        if self.terms != "data+params":
            return 0
        _, _, _, K = self._log_nprime(th)
        return int(np.sum(self.logN > K / th[3]))


def to_params(th: np.ndarray, terms: str = "data+params") -> dict[str, float]:
    out = theta_to_params(th[:5])
    out["R_D_star"] = float(np.exp(th[5]))
    if terms == "data+params":
        out["R_N_star"] = float(np.exp(th[6]))
    return out


def fit_theta(
    N,
    D,
    U,
    L,
    *,
    grid_mode: str = "fast",
    top_k: int = 32,
    delta: float = DELTA,
    starts=None,
    extra_starts=(),
    terms: str = "data+params",
):
    """Best theta of the summed-Huber objective: L-BFGS-B from the `top_k` best grid points
    (all of them with grid_mode='full': slow), plus `extra_starts`."""
    obj = Objective(N, D, U, L, delta, terms)
    pts = start_grid(terms) if starts is None else np.atleast_2d(starts)
    bounds = [BOUNDS[k] for k in THETA[terms]]
    res = multistart_lbfgsb(
        obj,
        pts,
        bounds,
        top_k=None if grid_mode == "full" else top_k,
        batch_objective=obj.batch,
        extra_starts=extra_starts,
    )
    again = multistart_lbfgsb(obj, res.x[None, :], bounds, top_k=None)  # polish with fresh L-BFGS memory
    if again.fun < res.fun:
        res.x, res.fun, res.nit = again.x, again.fun, res.nit + again.nit
    return res


def _fit(N, D, U, L, *, objective, grid_mode, top_k, delta, terms):
    """(result with .x/.fun/.success/.message/.to_diagnostics(), summed-Huber result)."""
    huber_res = fit_theta(N, D, U, L, grid_mode=grid_mode, top_k=top_k, delta=delta, terms=terms)
    if objective != "mle":
        return huber_res, huber_res

    obj = Objective(N, D, U, L, delta, terms)
    ranked = rank_by_abs_residuals(obj.batch_residuals, start_grid(terms), GRID_STARTS)
    labels = ["summed-Huber optimum"] + [f"grid point {i + 1} by sum |r|" for i in range(len(ranked))]
    bounds = [BOUNDS[k] for k in THETA[terms]]
    res = fit_mle(obj.residuals, obj.jacobian, [huber_res.x, *ranked], bounds, delta=delta, labels=labels)
    return res, huber_res


def fit_data_constrained(
    df,
    C,
    warnings,
    *,
    objective: str,
    grid: str,
    top_k: int,
    bootstrap: int,
    boot_top_k: int,
    seed: int,
    delta: float,
    ci: float,
    compute,
    terms: str = "data+params",
    cost=None,
    unique: float | None = None,
) -> dict:
    """The record body (params, intervals, objective, diagnostics, derived, settings, bootstrap) for
    `fit_chinchilla(..., law='data-constrained')`; `df` has N, D, U, loss (validated). `unique`: the
    unique tokens the runs share (None when they differ), where the derived optima are taken."""
    if terms not in TERMS:
        raise InputError(f"--terms must be one of {', '.join(TERMS)} (got {terms!r})")
    names = THETA[terms]
    N, D, U, L = (df[c].to_numpy(float) for c in ("N", "D", "U", "loss"))
    U = np.minimum(U, D)  # U is what the run could draw from; it saw at most D of it
    epochs = D / U
    repeated = epochs > 1.0 + 1e-9
    if not repeated.any():
        raise InputError(
            "--law data-constrained: no run repeats its data (D <= U in every row), so R_D_star is not "
            "identified; fit the plain law instead"
        )
    warnings.extend(identification_warnings(N, D))
    n_levels = np.unique(np.round(np.log(epochs[repeated]), 6)).size
    if n_levels < 2:
        warnings.append(
            f"weakly identified: the repeated runs cover only {n_levels} repetition level "
            f"({float(epochs[repeated].max()):.3g} epochs); R_D_star is barely constrained"
        )
    res, huber_res = _fit(N, D, U, L, objective=objective, grid_mode=grid, top_k=top_k, delta=delta, terms=terms)
    params = to_params(res.x, terms)
    if objective == "mle":
        params["sigma"] = res.sigma

        warnings.extend(sigma_warnings(res))
    full = Objective(N, D, U, L, delta, terms)
    n_excess = full.n_excess(res.x)
    _bound_warnings(res.x, names, n_excess, warnings)
    if terms == "data+params" and n_excess < 2:
        warnings.append(
            f"R_N_star is not identified: {n_excess} run(s) have more parameters than the "
            "compute-optimal N for their unique tokens (N > U_N at the fitted law); train larger "
            "models on the repeated data, or fit --terms data"
        )
    if not res.success:
        warnings.append(f"optimiser did not converge from the best start: {res.message}")
    settings = _settings(terms, delta, grid, top_k, objective, unique)
    resid = full.residuals(res.x)
    diagnostics = huber_diagnostics(res, names, resid, delta)
    diagnostics.update(
        {
            "epochs_max": float(epochs.max()),
            "n_repeated_runs": int(repeated.sum()),
            "residuals_log": [float(r) for r in resid],
        }
    )
    if terms == "data+params":
        diagnostics["n_excess_param_runs"] = n_excess
    if objective == "mle":
        diagnostics["huber_start_objective"] = float(huber_res.fun)
    samples: dict = {}
    intervals: dict = {}
    boot = None
    if bootstrap:
        samples, intervals, boot = _bootstrap_record(
            N, D, U, L, res, huber_res, objective, bootstrap, boot_top_k, seed, delta, ci, terms, warnings
        )
    law = DataConstrainedLaw(**{k: params[k] for k in CORE[terms]})
    derived = _derived(law, samples, compute or compute_grid(C), C, ci, cost, unique, N)
    warnings.extend(w for w in [extrapolation_warning(compute, C)] if w)
    return pipeline.fit_fields(params, intervals, res.fun, diagnostics, derived, settings, boot)


def _settings(terms: str, delta: float, grid: str, top_k: int, objective: str, unique: float | None) -> dict:
    """The record's settings: the fit's choices, the law's form and parametrisation, and what the derived
    optima assume of the unique data."""
    return {
        "law": "data-constrained",
        "terms": terms,
        "delta": delta,
        "grid": grid,
        "top_k": None if grid == "full" else top_k,
        "objective": objective,
        "form": FORM[terms],
        "parametrisation": "LSE(a - alpha log N', b - beta log D', e), r = log R_D_star"
        + (", s = log R_N_star" if terms == "data+params" else ""),
        "fitted": "all parameters jointly (" + ", ".join(CORE[terms]) + ")",
        "derived_assumes": (
            f"the runs' {unique:.4g} unique tokens (N_opt, D_opt); N_opt_fresh, D_opt_fresh: unlimited unique data"
            if unique
            else "unique data >= D_opt (no repetition): the runs do not share one data set"
        ),
    }


def _bootstrap_record(
    N, D, U, L, res, huber_res, objective, bootstrap, boot_top_k, seed, delta, ci, terms, warnings
) -> tuple[dict, dict, dict]:
    """(samples, intervals, the record's bootstrap block) from resampling runs, each refitted like the full data."""
    b = _bootstrap(
        N,
        D,
        U,
        L,
        res,
        huber_res,
        objective=objective,
        bootstrap=bootstrap,
        boot_top_k=boot_top_k,
        seed=seed,
        delta=delta,
        ci=ci,
        terms=terms,
    )
    samples, intervals = b.samples, b.intervals()
    mle = objective == "mle"
    refit = "maximum likelihood (all parameters and sigma)" if mle else "summed Huber"
    starts = (
        "full-data MLE and summed-Huber optima"
        if mle
        else f"full-data optimum + the {boot_top_k} best grid points on the full data"
    )
    boot = b.record(
        method=f"resample runs with replacement; each resample refits the {refit}; percentile intervals",
        starts=starts,
        reasons_key=None,
    )
    # standard errors of every parameter, samples of the law's
    boot["samples"] = {k: samples[k] for k in CORE[terms] if k in samples}
    if b.failed:
        warnings.append(f"{b.failed} of {bootstrap} bootstrap resamples failed to fit")
    return samples, intervals, boot


def _bound_warnings(x, names, n_excess: int, warnings: list[str]) -> None:
    for k, v in zip(names, x):
        lo, hi = BOUNDS[k]
        if not at_bound(v, lo, hi):
            continue
        what = ""
        top = v >= hi - 1e-6
        if k == "r":
            what = " (log R_D_star: " + (
                "repeated data looks as good as fresh data in these runs)" if top else "repetition looks worthless)"
            )
        elif k == "s":
            what = " (log R_N_star: " + (
                "excess parameters look as good as needed ones in these runs)"
                if top
                else "excess parameters look worthless)"
            )
        warnings.append(
            f"parameter {k} stopped on its bound ({v:.6g}; bounds [{lo:.6g}, {hi:.6g}]): "
            f"the fit is not at an interior optimum{what}"
        )


def _bootstrap(N, D, U, L, res, huber_res, *, objective, bootstrap, boot_top_k, seed, delta, ci, terms):
    idxs = bs.resample_indices(len(N), bootstrap, seed)
    bounds = [BOUNDS[k] for k in THETA[terms]]
    if objective == "mle":
        warm = [res.x, huber_res.x]

        def one(idx):
            o = Objective(N[idx], D[idx], U[idx], L[idx], delta, terms)
            r = fit_mle(o.residuals, o.jacobian, warm, bounds, delta=delta)
            return {**to_params(r.x, terms), "sigma": r.sigma}
    else:
        o_full = Objective(N, D, U, L, delta, terms)
        g = start_grid(terms)
        boot_starts = g[np.argsort(o_full.batch(g), kind="stable")[:boot_top_k]]

        def one(idx):
            r = fit_theta(
                N[idx],
                D[idx],
                U[idx],
                L[idx],
                grid_mode="full",
                starts=boot_starts,
                delta=delta,
                extra_starts=[res.x],
                terms=terms,
            )
            return to_params(r.x, terms)

    return pipeline.bootstrap(one, idxs, seed=seed, ci=ci)


def _derived(
    law: DataConstrainedLaw, samples: dict, grid_C, C: np.ndarray, ci: float, cost, unique: float | None, N
) -> list[dict]:
    """N_opt, D_opt, loss at each compute of interest, with bootstrap intervals: with the runs'
    unique tokens when they share one data set (and the fresh-data frontier beside it), else the
    fresh-data frontier alone."""
    cost = cost or TokenCost("6ND_total", "total")
    n_range = search_range(N)
    draws = None
    if samples:
        keys = [k for k in ("E", "A", "B", "alpha", "beta", "R_D_star", "R_N_star") if k in samples]
        draws = DataConstrainedLaw(**{k: np.asarray(samples[k], dtype=float)[:, None] for k in keys})
    rows = []
    for c in sorted(set(grid_C)):
        n_f, d_f = (float(v) for v in optimal(law, c, cost, n_range))
        row = {"C": c, "extrapolation_factor": c / float(C.max())}
        fresh = {"N_opt": n_f, "D_opt": d_f, "loss_opt": float(law.predict(n_f, d_f))}
        if unique:
            n_u, d_u = (float(v) for v in allocate(partial(law.predict, U=unique), c, cost, n_range))
            row.update(
                {
                    "N_opt": n_u,
                    "D_opt": d_u,
                    "loss_opt": float(law.predict(n_u, d_u, U=unique)),
                    "unique_tokens": unique,
                    "epochs_opt": d_u / unique,
                    **{f"{k}_fresh": v for k, v in fresh.items()},
                }
            )
        else:
            row.update(fresh)
        if draws is not None:
            with np.errstate(all="ignore"):
                pred = partial(draws.predict, U=unique) if unique else draws.predict
                ns, ds = allocate(pred, c, cost, n_range)
                ls = np.ravel(pred(ns[:, None], ds[:, None]))  # each resample's law at its own optimum
            row.update(pipeline.interval_fields({"N_opt": ns, "D_opt": ds, "loss_opt": ls}, ci))
        rows.append(row)
    return rows
