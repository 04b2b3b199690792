"""`fit chinchilla --law data-constrained`: Muennighoff et al. 2023's law with repeated data.

    L(N, D, U) = E + A / N^alpha + B / D'^beta,   D' = U + U R* (1 - exp(-R_D / R*)),
    R_D = D/U - 1 (repetitions beyond the first epoch), U = unique tokens the run saw: min(the
    unique tokens available to it (its training split), D) -- a run shorter than one epoch repeats nothing.

Implemented: the data term only (the paper's D'), with R* = R_D_star fitted as a sixth parameter;
the paper's excess-parameter term N' (R_N_star) is not fitted (N' = N). Parametrisation as
Chinchilla's approach 3, plus r = log R_D_star:
    log L_hat = LSE(a - alpha log N, b - beta log D', e).
Objectives as for approach 3: the summed Huber(delta) of log residuals (multi-start L-BFGS-B from
the paper's grid x a few R_D_star values) or the Huber-density likelihood (`--objective mle`).
"""
from __future__ import annotations

import itertools

import numpy as np

from scaling import bootstrap as bs
from scaling import pipeline
from scaling.chinchilla_huber import BOUNDS as CH_BOUNDS
from scaling.chinchilla_huber import PAPER_GRID, theta_to_params
from scaling.common import at_bound, compute_grid, extrapolation_warning, huber_diagnostics, identification_warnings
from scaling.errors import InputError
from scaling.huber import DELTA, huber, huber_grad
from scaling.multistart import multistart_lbfgsb

THETA = ("a", "b", "e", "alpha", "beta", "r")  # r = log R_D_star
BOUNDS = {**CH_BOUNDS, "r": (float(np.log(0.01)), float(np.log(1e4)))}
R_STAR_GRID = (1.0, 4.0, 16.0, 64.0)  # starting values of R_D_star, crossed with the paper's grid
CORE = ("E", "A", "B", "alpha", "beta", "R_D_star")
TERMS = ("data+params", "data")  # --terms: the complete law (R_D_star and R_N_star) or the data term only


def start_grid() -> np.ndarray:
    """The paper's 4,500 starts crossed with R_STAR_GRID (rows in THETA order)."""
    g = PAPER_GRID
    rows = itertools.product(g["a"], g["b"], g["e"], g["alpha"], g["beta"], np.log(R_STAR_GRID))
    return np.array(list(rows), dtype=float)


class Objective:
    """Summed Huber of log residuals of the data-constrained law; f(theta) -> (value, gradient)."""

    def __init__(self, N, D, U, L, delta: float = DELTA):
        self.logN = np.log(np.asarray(N, dtype=float))
        self.logU = np.log(np.asarray(U, dtype=float))
        self.reps = np.maximum(np.asarray(D, dtype=float) / np.asarray(U, dtype=float) - 1.0, 0.0)
        self.logL = np.log(np.asarray(L, dtype=float))
        self.delta = delta

    def _log_dprime(self, r):
        """log D' and d log D' / d r for r = log R* (broadcasts over a column of r values)."""
        rs = np.exp(r)
        decay = np.exp(-self.reps / rs)
        q = -rs * np.expm1(-self.reps / rs)  # R* (1 - exp(-R_D/R*)), the extra effective epochs
        return self.logU + np.log1p(q), (q - self.reps * decay) / (1.0 + q)

    def residuals(self, th: np.ndarray) -> np.ndarray:
        a, b, e, alpha, beta, r = th
        ld, _ = self._log_dprime(r)
        return np.logaddexp(np.logaddexp(a - alpha * self.logN, b - beta * ld), e) - self.logL

    def jacobian(self, th: np.ndarray) -> np.ndarray:
        a, b, e, alpha, beta, r = th
        ld, dld = self._log_dprime(r)
        t1, t2 = a - alpha * self.logN, b - beta * ld
        m = np.maximum(np.maximum(t1, t2), e)
        w1, w2, w3 = np.exp(t1 - m), np.exp(t2 - m), np.exp(e - m)
        s = w1 + w2 + w3
        p1, p2 = w1 / s, w2 / s
        return np.column_stack([p1, p2, w3 / s, -p1 * self.logN, -p2 * ld, -beta * p2 * dld])

    def __call__(self, th: np.ndarray) -> tuple[float, np.ndarray]:
        res = self.residuals(th)
        return float(huber(res, self.delta).sum()), self.jacobian(th).T @ huber_grad(res, self.delta)

    def batch_residuals(self, thetas: np.ndarray) -> np.ndarray:
        th = np.atleast_2d(thetas)
        ld, _ = self._log_dprime(th[:, 5:6])
        t1 = th[:, 0:1] - th[:, 3:4] * self.logN[None, :]
        t2 = th[:, 1:2] - th[:, 4:5] * ld
        return np.logaddexp(np.logaddexp(t1, t2), th[:, 2:3]) - self.logL[None, :]

    def batch(self, thetas: np.ndarray) -> np.ndarray:
        return huber(self.batch_residuals(thetas), self.delta).sum(axis=1)


def to_params(th: np.ndarray) -> dict[str, float]:
    out = theta_to_params(th[:5])
    out["R_D_star"] = float(np.exp(th[5]))
    return out


def fit_theta(N, D, U, L, *, grid_mode: str = "fast", top_k: int = 32, delta: float = DELTA, starts=None, extra_starts=()):
    """Best theta of the summed-Huber objective: L-BFGS-B from the `top_k` best grid points
    (all of them with grid_mode='full': 18,000 starts, slow), plus `extra_starts`."""
    obj = Objective(N, D, U, L, delta)
    pts = start_grid() if starts is None else np.atleast_2d(starts)
    bounds = [BOUNDS[k] for k in THETA]
    res = multistart_lbfgsb(obj, pts, bounds, top_k=None if grid_mode == "full" else top_k, batch_objective=obj.batch, extra_starts=extra_starts)
    again = multistart_lbfgsb(obj, res.x[None, :], bounds, top_k=None)  # polish with fresh L-BFGS memory
    if again.fun < res.fun:
        res.x, res.fun, res.nit = again.x, again.fun, res.nit + again.nit
    return res


def _fit(N, D, U, L, *, objective, grid_mode, top_k, delta):
    """(result with .x/.fun/.success/.message/.to_diagnostics(), summed-Huber result)."""
    huber_res = fit_theta(N, D, U, L, grid_mode=grid_mode, top_k=top_k, delta=delta)
    if objective != "mle":
        return huber_res, huber_res
    from scaling.chinchilla_mle import GRID_STARTS
    from scaling.likelihood import fit_mle, rank_by_abs_residuals

    obj = Objective(N, D, U, L, delta)
    ranked = rank_by_abs_residuals(obj.batch_residuals, start_grid(), GRID_STARTS)
    labels = ["summed-Huber optimum"] + [f"grid point {i + 1} by sum |r|" for i in range(len(ranked))]
    res = fit_mle(obj.residuals, obj.jacobian, [huber_res.x, *ranked], [BOUNDS[k] for k in THETA], delta=delta, labels=labels)
    return res, huber_res


def fit_data_constrained(df, C, warnings, *, objective: str, grid: str, top_k: int, bootstrap: int, boot_top_k: int,
                         seed: int, delta: float, ci: float, compute) -> dict:
    """The record body (params, intervals, objective, diagnostics, derived, settings, bootstrap) for
    `fit_chinchilla(..., law='data-constrained')`; `df` has N, D, U, loss (validated, D >= U)."""
    from scaling.laws import DataConstrainedLaw

    N, D, U, L = (df[c].to_numpy(float) for c in ("N", "D", "U", "loss"))
    U = np.minimum(U, D)  # U is what the run could draw from; it saw at most D of it
    epochs = D / U
    repeated = epochs > 1.0 + 1e-9
    if not repeated.any():
        raise InputError("--law data-constrained: no run repeats its data (D <= U in every row), so R_D_star is not identified; fit the plain law instead")
    warnings.extend(identification_warnings(N, D))
    n_levels = np.unique(np.round(np.log(epochs[repeated]), 6)).size
    if n_levels < 2:
        warnings.append(f"weakly identified: the repeated runs cover only {n_levels} repetition level ({float(epochs[repeated].max()):.3g} epochs); R_D_star is barely constrained")
    res, huber_res = _fit(N, D, U, L, objective=objective, grid_mode=grid, top_k=top_k, delta=delta)
    params = to_params(res.x)
    if objective == "mle":
        params["sigma"] = res.sigma
        from scaling.chinchilla_mle import sigma_warnings

        warnings.extend(sigma_warnings(res))
    for k, v in zip(THETA, res.x):
        lo, hi = BOUNDS[k]
        if at_bound(v, lo, hi):
            what = " (log R_D_star: " + ("repeated data looks as good as fresh data in these runs)" if v >= hi - 1e-6 else "repetition looks worthless)") if k == "r" else ""
            warnings.append(f"parameter {k} stopped on its bound ({v:.6g}; bounds [{lo:.6g}, {hi:.6g}]): the fit is not at an interior optimum{what}")
    if not res.success:
        warnings.append(f"optimiser did not converge from the best start: {res.message}")
    settings = {
        "law": "data-constrained", "delta": delta, "grid": grid, "top_k": None if grid == "full" else top_k, "objective": objective,
        "form": "L = E + A/N^alpha + B/D'^beta, D' = U + U R_D_star (1 - exp(-(D/U - 1)/R_D_star)) (Muennighoff et al. 2023, data term only; N' = N)",
        "parametrisation": "LSE(a - alpha log N, b - beta log D', e), r = log R_D_star",
        "derived_assumes": "unique data >= D_opt (no repetition): the Chinchilla frontier of the fitted E, A, B, alpha, beta",
    }
    resid = Objective(N, D, U, L, delta).residuals(res.x)
    diagnostics = huber_diagnostics(res, THETA, resid, delta)
    diagnostics.update({
        "epochs_max": float(epochs.max()),
        "n_repeated_runs": int(repeated.sum()),
    })
    if objective == "mle":
        diagnostics["huber_start_objective"] = float(huber_res.fun)
    samples: dict = {}
    intervals: dict = {}
    boot = None
    if bootstrap:
        idxs = bs.resample_indices(len(N), bootstrap, seed)
        if objective == "mle":
            from scaling.likelihood import fit_mle

            warm = [res.x, huber_res.x]

            def one(idx):
                o = Objective(N[idx], D[idx], U[idx], L[idx], delta)
                r = fit_mle(o.residuals, o.jacobian, warm, [BOUNDS[k] for k in THETA], delta=delta)
                return {**to_params(r.x), "sigma": r.sigma}

            method, starts_desc = "resample runs with replacement; each resample refits the maximum likelihood (all parameters and sigma); percentile intervals", "full-data MLE and summed-Huber optima"
        else:
            o_full = Objective(N, D, U, L, delta)
            g = start_grid()
            boot_starts = g[np.argsort(o_full.batch(g), kind="stable")[:boot_top_k]]

            def one(idx):
                r = fit_theta(N[idx], D[idx], U[idx], L[idx], grid_mode="full", starts=boot_starts, delta=delta, extra_starts=[res.x])
                return to_params(r.x)

            method, starts_desc = "resample runs with replacement; each resample refits the summed Huber; percentile intervals", f"full-data optimum + the {boot_top_k} best grid points on the full data"
        b = pipeline.bootstrap(one, idxs, seed=seed, ci=ci)
        samples, intervals = b.samples, b.intervals()
        boot = b.record(method=method, starts=starts_desc, reasons_key=None)
        boot["samples"] = {k: samples[k] for k in CORE if k in samples}  # standard errors of every parameter, samples of the law's
        if b.failed:
            warnings.append(f"{b.failed} of {bootstrap} bootstrap resamples failed to fit")
    law = DataConstrainedLaw(**{k: params[k] for k in CORE})
    derived = _derived(law, samples, compute, C, ci)
    warnings.extend(w for w in [extrapolation_warning(compute, C)] if w)
    out = {"params": params, "intervals": intervals, "objective": res.fun, "diagnostics": diagnostics, "derived": derived, "settings": settings}
    if boot:
        out["bootstrap"] = boot
    return out


def _derived(law, samples: dict, compute, C: np.ndarray, ci: float) -> list[dict]:
    """N_opt, D_opt, loss at each compute of interest, with bootstrap intervals (fresh data)."""
    from scaling.laws import ChinchillaLaw

    grid_C = compute or compute_grid(C)
    rows = []
    for c in grid_C:
        n_opt, d_opt = law.compute_optimal(c)
        row = {"C": c, "N_opt": float(n_opt), "D_opt": float(d_opt), "loss_opt": float(law.predict(n_opt, d_opt)), "extrapolation_factor": c / float(C.max())}
        if samples:
            s = ChinchillaLaw(**{k: np.asarray(samples[k]) for k in ("E", "A", "B", "alpha", "beta")})
            with np.errstate(all="ignore"):
                ns, ds = s.compute_optimal(c)
                ls = s.predict(ns, ds)
            row.update(pipeline.interval_fields({"N_opt": ns, "D_opt": ds, "loss_opt": ls}, ci))
        rows.append(row)
    return rows
