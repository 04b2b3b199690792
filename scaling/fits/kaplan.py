"""Kaplan et al. 2020 laws fitted the same robust way as Chinchilla's Approach 3.

form 'nd': log L = alphaD * LSE((alphaN/alphaD)(log Nc - log N), log Dc - log D)
form 'n' : log L = alphaN (log Nc - log N);  form 'd': log L = alphaD (log Dc - log D)
Objective: sum of Huber(delta) on log residuals; analytic gradients; multi-start L-BFGS-B.
Kaplan's N is the non-embedding parameter count: use `--n-kind non_embedding` on run dirs.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from scaling.core import bootstrap as bs
from scaling.core.blas import blas_single_thread
from scaling.core.conventions import compute_column, default_compute
from scaling.core.diagnostics import at_bound, identification_warnings
from scaling.core.errors import InputError
from scaling.core.huber import DELTA, huber, huber_grad
from scaling.core.multistart import multistart_lbfgsb
from scaling.core.selection import drop_highest, holdout_by_compute, holdout_split
from scaling.data import inputs
from scaling.fits import pipeline
from scaling.fits.record import FitRecord, data_sha256

FORMS = {"nd": ("lNc", "lDc", "alphaN", "alphaD"), "n": ("lNc", "alphaN"), "d": ("lDc", "alphaD")}
GRID = {
    "lNc": [20.0, 25.0, 30.0, 35.0, 40.0],
    "lDc": [20.0, 25.0, 30.0, 35.0, 40.0],
    "alphaN": [0.03, 0.08, 0.2, 0.5],
    "alphaD": [0.03, 0.1, 0.3, 0.6],
}
BOUNDS = {"lNc": (-20.0, 150.0), "lDc": (-20.0, 150.0), "alphaN": (1e-4, 5.0), "alphaD": (1e-4, 5.0)}


class KaplanObjective:
    def __init__(self, form, N, D, L, delta=DELTA):
        self.form = form
        self.logN = None if N is None else np.log(np.asarray(N, float))
        self.logD = None if D is None else np.log(np.asarray(D, float))
        self.logL = np.log(np.asarray(L, float))
        self.delta = delta

    def _pred(self, th):
        if self.form == "n":
            lNc, aN = th
            p = aN * (lNc - self.logN)
            return p, np.stack([np.full_like(p, aN), lNc - self.logN])
        if self.form == "d":
            lDc, aD = th
            p = aD * (lDc - self.logD)
            return p, np.stack([np.full_like(p, aD), lDc - self.logD])
        lNc, lDc, aN, aD = th
        u = (aN / aD) * (lNc - self.logN)
        v = lDc - self.logD
        s = np.logaddexp(u, v)
        wu = np.exp(u - s)
        wv = 1.0 - wu
        jac = np.stack([aN * wu, aD * wv, wu * (lNc - self.logN), s - wu * u])
        return aD * s, jac

    def __call__(self, th):
        p, jac = self._pred(th)
        r = p - self.logL
        return float(huber(r, self.delta).sum()), jac @ huber_grad(r, self.delta)

    def batch(self, thetas):
        return np.array([self(t)[0] for t in thetas])

    def residuals(self, th):
        return self._pred(th)[0] - self.logL


def _params(form, th) -> dict:
    names = FORMS[form]
    d = dict(zip(names, map(float, th)))
    out = {}
    if "lNc" in d:
        out["Nc"] = float(np.exp(d["lNc"]))
        out["alphaN"] = d["alphaN"]
    if "lDc" in d:
        out["Dc"] = float(np.exp(d["lDc"]))
        out["alphaD"] = d["alphaD"]
    return out


def _fit(form, N, D, L, delta, top_k, extra=()):
    names = FORMS[form]
    obj = KaplanObjective(form, N, D, L, delta)
    grid = np.array(list(itertools.product(*(GRID[n] for n in names))))
    return multistart_lbfgsb(
        obj, grid, [BOUNDS[n] for n in names], top_k=top_k, batch_objective=obj.batch, extra_starts=extra
    ), obj


@blas_single_thread
def fit_kaplan(
    data,
    *,
    form: str = "nd",
    drop_highest_k: int = 0,
    bootstrap: int = 0,
    holdout: str | None = None,
    holdout_fraction: float = 0.1,
    seed: int = 0,
    columns=None,
    n_kind: str = "total",
    top_k: int = 16,
    delta: float = DELTA,
    ci: float = 0.95,
) -> FitRecord:
    """Fit Kaplan's L(N, D) (form 'nd'), L(N) ('n') or L(D) ('d') to `data`; returns a FitRecord."""
    if form not in FORMS:
        raise InputError(f"--form must be one of {', '.join(FORMS)} (got {form!r})")
    pipeline.FitOptions(bootstrap=bootstrap, seed=seed, ci=ci, holdout=holdout).check()
    ds = pipeline.load(data, columns, n_kind)
    need = {"nd": ("N", "D", "loss"), "n": ("N", "loss"), "d": ("D", "loss")}[form]
    min_pts = len(FORMS[form]) + 2
    inputs.validate(ds, need, min_points=min_pts, law=f"kaplan ({form})")
    df = drop_highest(ds.df, drop_highest_k)
    warnings = list(ds.warnings)
    held, rule = None, ""
    if holdout and form == "nd":  # by compute, like the other fits: what a study extrapolates to
        df, held, _, _, rule = holdout_by_compute(
            df, compute_column(df, default_compute(ds.n_kind), ds.n_kind), holdout_fraction
        )
    elif holdout:  # L(N) or L(D) alone: the largest N or D
        df, held = holdout_split(df, holdout_fraction, key="N" if "N" in need else "D")
        rule = f"the largest {'N' if 'N' in need else 'D'} ({len(held)} runs)"
    if len(df) < min_pts:
        raise InputError(f"kaplan ({form}): too few points to fit: {len(df)} (need {min_pts})")
    col = lambda c: df[c].to_numpy(float) if c in need else None  # noqa: E731
    N, D, L = col("N"), col("D"), df["loss"].to_numpy(float)
    if N is not None and D is not None:  # form nd
        warnings.extend(identification_warnings(N, D))
    t0 = time.perf_counter()
    res, obj = _fit(form, N, D, L, delta, top_k)
    names = FORMS[form]
    for n, v in zip(names, res.x):
        lo, hi = BOUNDS[n]
        if at_bound(v, lo, hi):
            warnings.append(f"parameter {n} stopped on its bound ({v:.6g}): not an interior optimum")
    if not res.success:
        warnings.append(f"optimiser did not converge: {res.message}")
    params = _params(form, res.x)
    intervals, boot = {}, None
    if bootstrap:
        sub = lambda a, i: None if a is None else a[i]  # noqa: E731
        b = pipeline.bootstrap(
            lambda i: _params(form, _fit(form, sub(N, i), sub(D, i), L[i], delta, 4, extra=[res.x])[0].x),
            bs.resample_indices(len(L), bootstrap, seed),
            seed=seed,
            ci=ci,
        )
        intervals = b.intervals()
        boot = b.record(reasons_key=None, seconds=False)
    resid = obj.residuals(res.x)
    diagnostics = res.to_diagnostics()
    diagnostics.update(
        {
            "fit_seconds": time.perf_counter() - t0,
            "residual_log_rms": float(np.sqrt(np.mean(resid**2))),
            "residuals_log": [float(r) for r in resid],
        }
    )
    data_range: dict[str, list[float]] = {
        k: [float(df[k].min()), float(df[k].max())] for k in ("N", "D", "loss") if k in need
    }
    if form == "nd":
        C = compute_column(df, default_compute(ds.n_kind), ds.n_kind)
        data_range["C"] = [float(C.min()), float(C.max())]
    rec = pipeline.record(
        law="kaplan",
        approach=None,
        params=params,
        intervals=intervals,
        objective=res.fun,
        n_points=len(df),
        warnings=warnings,
        data_sha256=data_sha256(df, list(need)),
        n_kind=ds.n_kind,
        source=ds.source,
        columns=ds.columns,
        conventions={"compute": default_compute(ds.n_kind), "n_kind": ds.n_kind, "n_source": ds.n_source},
        settings={
            "form": form,
            "delta": delta,
            "drop_highest": drop_highest_k,
            "bootstrap": bootstrap,
            "seed": seed,
            "ci": ci,
            "holdout": holdout,
        },
        diagnostics=diagnostics,
        data_range=data_range,
        bootstrap=boot,
    )
    if held is not None:
        pred = rec.law().predict(
            N=held["N"].to_numpy(float) if "N" in need else None, D=held["D"].to_numpy(float) if "D" in need else None
        )
        rec["holdout"] = pipeline.holdout_report(
            len(held), rule, "loss", pipeline.rel_errors(pred, held["loss"].to_numpy(float))
        )
    return rec
