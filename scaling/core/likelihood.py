"""Maximum likelihood with a Huber-shaped error density and a free scale (Besiroglu et al. 2024).

Epoch's headline Chinchilla fit models each log-loss residual r = log L_hat - log L as sigma * x with
x drawn from p(x) = exp(-H_delta(x)) / Z(delta), H_delta the Huber function, delta = 1e-3:

    log p(r) = -H_delta(r / sigma) - log Z(delta) - log sigma.

Normaliser: Z(delta) = integral of exp(-H_delta(x)) over the real line
          = 2 int_0^delta exp(-x^2/2) dx + 2 int_delta^inf exp(-delta x + delta^2/2) dx
          = sqrt(2 pi) erf(delta / sqrt 2) + (2 / delta) exp(-delta^2 / 2).

Why the fit is least absolute deviations at delta = 1e-3 (and why it needs its own optimiser):
the density is Gaussian only for |r| < sigma * delta and Laplace (exp(-delta |r| / sigma)) beyond.
The fitted sigma is tiny (log sigma ~ -12.3 on Epoch's data), so that Gaussian core is ~5e-9 wide
in log-loss, far below every residual: the likelihood is a Laplace likelihood with scale
sigma / delta. Profiling sigma out (sigma = delta * mean |r|) leaves: maximise the likelihood <=>
minimise S(theta) = sum |r_i(theta)|, nonlinear least absolute deviations. S is piecewise smooth
with kinks wherever a residual crosses zero, and its minimum sits ON such kinks (generically as
many zero residuals as parameters). Gradient methods (Epoch's BFGS ends with "precision loss")
zig-zag across the kinks; here S is minimised by sequential linear programming with a trust
region (each step an exact L1 problem solved by HiGHS), which lands on the kinks exactly, and the
result is then polished on the exact likelihood in all parameters plus log sigma, so that any
delta (also large ones, where the density is nearly Gaussian) is handled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scaling.core.errors import FitError
from scaling.core.huber import DELTA, huber, huber_grad

LOG_SIGMA_BOUNDS = (-60.0, 5.0)  # only to keep the polish finite; a hit is reported (perfect fits drive sigma to 0)


def log_normaliser(delta: float = DELTA) -> float:
    """log Z(delta), Z = sqrt(2 pi) erf(delta/sqrt 2) + (2/delta) exp(-delta^2/2)."""
    from scipy.special import erf  # deferred: scipy.special is slow to import

    return float(np.log(np.sqrt(2.0 * np.pi) * erf(delta / np.sqrt(2.0)) + 2.0 / delta * np.exp(-0.5 * delta * delta)))


def log_pdf(r, log_sigma: float, delta: float = DELTA) -> np.ndarray:
    """Log density of residuals r under the Huber-shaped density with scale exp(log_sigma)."""
    r = np.asarray(r, dtype=float)
    return -huber(r * np.exp(-log_sigma), delta) - log_normaliser(delta) - log_sigma


def log_likelihood(r, log_sigma: float, delta: float = DELTA) -> float:
    return float(np.sum(log_pdf(r, log_sigma, delta)))


def profile_log_sigma(r, delta: float = DELTA) -> float:
    """The log sigma that maximises the likelihood of fixed residuals r.

    Stationarity in log sigma: sum_i psi(x_i) x_i = n with x_i = r_i / sigma, psi = clip(., +-delta);
    the left side falls monotonically with sigma, so the root is unique. When every non-zero
    |r_i| exceeds sigma * delta (the Laplace regime) it is sigma = delta * mean|r|; otherwise it is
    found by bracketing. Returns -inf when all residuals are exactly zero (likelihood unbounded)."""
    from scipy.optimize import brentq  # deferred: scipy.optimize is slow to import

    a = np.abs(np.asarray(r, dtype=float))
    n = a.size
    nz = a[a > 0]
    if nz.size == 0:
        return float("-inf")
    s_lap = delta * a.sum() / n
    if np.all(nz > s_lap * delta):
        return float(np.log(s_lap))

    def g(ls):
        x = a * np.exp(-ls)
        return float(np.sum(np.minimum(x * x, delta * x)) - n)

    hi = np.log(min(s_lap, np.sqrt(np.mean(a * a))))  # g <= 0 here (both bounds on sum psi(x) x)
    lo = np.log(min(s_lap, nz.min() / delta)) - 1.0  # every non-zero term linear and sum > n here
    while g(lo) <= 0:
        lo -= 5.0
    if g(hi) >= 0:
        return float(hi)
    return float(brentq(g, lo, hi, xtol=1e-14, rtol=1e-15))


# ---------------------------------------------------------------- least absolute deviations
@dataclass
class LADResult:
    x: np.ndarray
    sum_abs: float
    nit: int
    converged: bool
    message: str


def _l1_step(r: np.ndarray, J: np.ndarray, dlo: np.ndarray, dhi: np.ndarray):
    """min_d sum_i |r_i + (J d)_i| over the box dlo <= d <= dhi, via its LP dual (n box-bounded
    variables y, p free t, 2p rows: a basis of size 2p instead of n, ~3x faster than the primal):

        max_y,t  r'y + sum_j t_j   s.t.  t_j <= dlo_j (J'y)_j,  t_j <= dhi_j (J'y)_j,  -1 <= y <= 1.

    The step is the primal solution, d_j = mu_lo_j dlo_j + mu_hi_j dhi_j from the rows' multipliers
    (mu_lo + mu_hi = 1). Returns (d, model value) or (None, message)."""
    from scipy.optimize import linprog  # deferred: scipy.optimize is slow to import

    n, p = J.shape
    A = np.zeros((2 * p, n + p))
    A[:p, :n] = -(J * dlo).T
    A[p:, :n] = -(J * dhi).T
    A[:p, n:] = A[p:, n:] = np.eye(p)
    lp = linprog(
        np.concatenate([-r, -np.ones(p)]),
        A_ub=A,
        b_ub=np.zeros(2 * p),
        bounds=[(-1.0, 1.0)] * n + [(None, None)] * p,
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    if lp.status != 0:
        return None, str(lp.message)
    mu = -lp.ineqlin.marginals
    d = np.clip(mu[:p] * dlo + mu[p:] * dhi, dlo, dhi)
    return d, -float(lp.fun)


def lad_slp(
    resid: Callable[[np.ndarray], np.ndarray],
    jac: Callable[[np.ndarray], np.ndarray],
    x0,
    bounds: Sequence[tuple[float, float]],
    *,
    radius: float = 0.5,
    max_iter: int = 400,
    rtol: float = 1e-13,
) -> LADResult:
    """Minimise S(x) = sum_i |r_i(x)| by sequential linear programming in an infinity-norm trust region.

    Each step solves the linearised L1 problem  min_d sum_i |r_i + (J d)_i|  with |d_j| <= radius and
    the box bounds exactly (`_l1_step`). A step is taken when S falls; the radius grows after good
    agreement with the model and shrinks otherwise. Converged when the model promises no decrease
    larger than rtol * S (first-order stationarity for L1)."""
    lo = np.array([b[0] for b in bounds], dtype=float)
    hi = np.array([b[1] for b in bounds], dtype=float)
    x = np.clip(np.asarray(x0, dtype=float), lo, hi)
    r = resid(x)
    S = float(np.abs(r).sum())
    message = "iteration limit"
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (used after the loop: the iterations run)
        if not np.isfinite(S):
            message = "non-finite residuals"
            break
        d, model = _l1_step(r, jac(x), np.maximum(-radius, lo - x), np.minimum(radius, hi - x))
        if d is None:
            message = f"LP step failed: {model}"
            break
        predicted = S - model
        if predicted <= rtol * max(S, 1e-300):
            converged, message = True, "no descent direction within the trust region (L1 stationary point)"
            break
        x_new = np.clip(x + d, lo, hi)
        r_new = resid(x_new)
        S_new = float(np.abs(r_new).sum())
        ratio = (S - S_new) / predicted
        step = float(np.max(np.abs(d)))
        if S_new < S:
            x, r, S = x_new, r_new, S_new
        if ratio > 0.75 and step > 0.5 * radius:
            radius = min(2.0 * radius, 10.0)
        elif ratio < 0.25:
            radius = 0.25 * step
        if radius < 1e-15 * (1.0 + float(np.max(np.abs(x)))):
            converged = predicted <= 1e-9 * max(S, 1e-300)
            message = "trust region collapsed" + (" at a stationary point (to rounding)" if converged else "")
            break
    return LADResult(x=x, sum_abs=S, nit=it, converged=converged, message=message)


# ---------------------------------------------------------------- the maximum-likelihood fit
@dataclass
class MLEResult:
    x: np.ndarray  # model parameters (without log sigma)
    log_sigma: float
    loglik: float
    sum_abs: float
    success: bool
    message: str
    nit: int
    n_runs: int
    n_within_tol: int
    start_index: int
    start_labels: list[str] = field(default_factory=list)
    polish_gain: float = 0.0
    delta: float = DELTA

    @property
    def fun(self) -> float:
        """The minimised objective: the negative log-likelihood."""
        return -self.loglik

    @property
    def sigma(self) -> float:
        return float(np.exp(self.log_sigma))

    def to_diagnostics(self) -> dict:
        return {
            "optimizer": "sequential LP for least absolute deviations (HiGHS, trust region), "
            "then L-BFGS-B and BFGS on the exact likelihood (the better kept)",
            "starts_run": self.n_runs,
            "starts": self.start_labels,
            "starts_reaching_best": self.n_within_tol,
            "best_start": self.start_labels[self.start_index] if self.start_labels else self.start_index,
            "converged": self.success,
            "message": self.message,
            "iterations": self.nit,
            "log_likelihood": self.loglik,
            "log_sigma": self.log_sigma,
            "laplace_scale": self.sigma
            / self.delta,  # sigma/delta: the log-residual scale when the density is Laplace-like
            "sum_abs_residuals": self.sum_abs,
            "polish_log_likelihood_gain": self.polish_gain,
        }


def neg_log_likelihood(resid, jac, delta: float = DELTA, log_z: float | None = None):
    """f(z) -> (-log-likelihood, gradient) with z = (model parameters, log sigma)."""
    log_z = log_normaliser(delta) if log_z is None else log_z

    def f(z):
        x, ls = z[:-1], z[-1]
        r = resid(x)
        inv = np.exp(-ls)
        u = r * inv
        val = float(huber(u, delta).sum()) + r.size * (log_z + ls)
        psi = huber_grad(u, delta)
        gx = jac(x).T @ (psi * inv)
        gls = r.size - float(psi @ u)
        return val, np.append(gx, gls)

    return f


def fit_mle(
    resid: Callable[[np.ndarray], np.ndarray],
    jac: Callable[[np.ndarray], np.ndarray],
    starts: Sequence[np.ndarray],
    bounds: Sequence[tuple[float, float]],
    *,
    delta: float = DELTA,
    labels: Sequence[str] | None = None,
    polish: bool = True,
) -> MLEResult:
    """Maximum likelihood of the Huber-shaped density for residual function `resid` (model
    parameters x; log sigma is profiled, then refined jointly): least absolute deviations from
    every start by `lad_slp`, the best (ties: first start) polished on the exact likelihood."""
    from scipy.optimize import minimize  # deferred: scipy.optimize is slow to import

    labels = list(labels) if labels is not None else [str(i) for i in range(len(starts))]
    runs = [lad_slp(resid, jac, s, bounds) for s in starts]
    sums = np.array([r.sum_abs if np.isfinite(r.sum_abs) else np.inf for r in runs])
    if not np.isfinite(sums).any():
        raise FitError("maximum likelihood: no start produced finite residuals")
    tol = 1e-9 * max(float(sums.min()), 1e-300)
    k = int(np.flatnonzero(sums - sums.min() <= tol)[0])  # ties (to rounding) go to the first start: deterministic
    best = runs[k]
    within = int(np.sum(sums - sums.min() <= tol))
    log_z = log_normaliser(delta)
    x, ls = best.x, profile_log_sigma(resid(best.x), delta)
    ls = float(np.clip(ls, *LOG_SIGMA_BOUNDS))
    ll = log_likelihood(resid(x), ls, delta)
    gain = 0.0
    if polish:
        # Inside the Gaussian core (|r| < sigma delta, ~5e-9 on Epoch's data) the exact likelihood is
        # smooth but extremely curved; L-BFGS-B (bounded) and BFGS (full Hessian estimate, kept only
        # if it stays inside the bounds) sometimes stop at different points 1e-8 apart in log-likelihood:
        # take the better. Both start from the L1 vertex, so neither can end worse than it.
        f = neg_log_likelihood(resid, jac, delta, log_z)
        z0 = np.append(x, ls)
        box = list(bounds) + [LOG_SIGMA_BOUNDS]
        lo, hi = np.array([b[0] for b in box]), np.array([b[1] for b in box])
        with np.errstate(all="ignore"):
            tries = [
                minimize(
                    f,
                    z0,
                    jac=True,
                    method="L-BFGS-B",
                    bounds=box,
                    options={"ftol": 0.0, "gtol": 1e-12, "maxiter": 200, "maxls": 50},
                ),
                minimize(f, z0, jac=True, method="BFGS", options={"gtol": 1e-12, "maxiter": 200}),
            ]
        for pol in tries:
            inside = bool(np.all(pol.x >= lo) and np.all(pol.x <= hi))
            if inside and np.isfinite(pol.fun) and -pol.fun > ll:
                gain += float(-pol.fun - ll)
                x, ls, ll = np.asarray(pol.x[:-1]), float(pol.x[-1]), float(-pol.fun)
    return MLEResult(
        x=np.asarray(x, dtype=float),
        log_sigma=ls,
        loglik=ll,
        sum_abs=float(np.abs(resid(x)).sum()),
        success=best.converged,
        message=best.message,
        nit=best.nit,
        n_runs=len(runs),
        n_within_tol=within,
        start_index=k,
        start_labels=labels,
        polish_gain=gain,
        delta=delta,
    )


def rank_by_abs_residuals(batch_residuals: Callable[[np.ndarray], np.ndarray], grid: np.ndarray, k: int) -> np.ndarray:
    """The k grid rows with the smallest sum of absolute residuals (vectorised, stable order)."""
    vals = np.abs(batch_residuals(grid)).sum(axis=1)
    vals = np.where(np.isfinite(vals), vals, np.inf)
    return grid[np.argsort(vals, kind="stable")[:k]]
