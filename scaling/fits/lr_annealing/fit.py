"""`scalelab fit lr-annealing`: the learning-rate annealing law (Tissue et al. 2024) fitted to whole loss curves.

    L(s) = L0 + A * S1^(-alpha) - C * S2     (areas and conventions: scaling/laws/lr_annealing.py)

Fitted to every point of every curve at once (inputs: scaling/fits/lr_annealing/curves.py) by the summed
Huber(1e-3) log residuals and multi-start L-BFGS-B (scaling/fits/lr_annealing/objective.py), through the
shared pipeline: options -> load -> fit -> bootstrap (whole curves resampled) -> holdout -> record.
The record (scaling/fits/lr_annealing/record.py) predicts any schedule's curve
(`scaling.laws.lr_annealing.predict_curve`, `scalelab predict-curve`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from scaling.core import bootstrap as bs
from scaling.core.blas import blas_single_thread
from scaling.core.diagnostics import at_bound, huber_diagnostics
from scaling.core.errors import FitError, InputError
from scaling.core.huber import DELTA
from scaling.fits import pipeline
from scaling.fits.lr_annealing import objective as lf
from scaling.fits.lr_annealing.curves import Curve, load_curves
from scaling.fits.lr_annealing.record import (
    LrAnnealingRecord,
    curve_rows,
    data_hash,
    data_range,
    holdout_report,
    warmup_text,
)
from scaling.fits.record import FitRecord
from scaling.laws.lr_annealing import LAMBDA, PARAMS, WARMUP_RULES, AnnealingLaw

HOLDOUT_RULES = ("last-run", "tail")
# --lambda auto: the decay factors tried (memories 1/(1 - lambda) of 1 to 2,000 steps, and none)
LAMBDA_GRID = (0.0, 0.9, 0.95, 0.98, 0.99, 0.995, 0.997, 0.998, 0.999, 0.9995)
FLAT_PROFILE = 0.01  # lambdas whose objective is within 1% of the best are "as good"
MIN_POINTS = 8
BOOT_TOP_K = 2  # grid starts per resample, besides the full-data optimum
IDENTIFIED_RATIO = 2.0

CONVENTIONS = {
    "step": "s = optimizer updates completed; lr of update s is the "
    "schedule's lr at 0-based step s - 1 (rundir.schedules.lr_at)",
    "S1": "sum of the lr of updates 1..s (forward area)",
    "S2": "sum over updates 1..s of m_k, m_k = lambda m_(k-1) + "
    "(lr_(k-1) - lr_k), m_1 = 0 (annealing area with momentum)",
    "lr_units": "as given: A and C are in those units, so predict schedules given in the same (raw) lr",
}
WINDOW_TEXT = {
    "window": "a logged training loss is the trainer's mean over its log window (the updates since the previous "
    "record): compared with the law's mean L over the same updates",
    "point": "each loss is compared with L at its step",
}


@dataclass(frozen=True)
class AnnealingOptions(pipeline.FitOptions):
    lam: float | str = LAMBDA
    warmup: str = "peak"
    skip_fraction: float = 0.0
    holdout_fraction: float = 0.2
    delta: float = DELTA

    def check(self) -> AnnealingOptions:
        if self.holdout is not None and self.holdout not in HOLDOUT_RULES:
            raise InputError(f"--holdout must be one of {', '.join(HOLDOUT_RULES)} (got {self.holdout!r})")
        pipeline.FitOptions(self.bootstrap, self.seed, self.ci, None).check()
        if self.lam != "auto" and not (isinstance(self.lam, (int, float)) and 0 <= self.lam < 1):
            raise InputError(f"--lambda must be a number in [0, 1) or auto (got {self.lam!r})")
        if self.warmup not in WARMUP_RULES:
            raise InputError(f"--warmup must be one of {', '.join(WARMUP_RULES)} (got {self.warmup!r})")
        if not 0 <= self.skip_fraction < 1:
            raise InputError(f"--skip-fraction must be in [0, 1) (got {self.skip_fraction})")
        if not 0 < self.holdout_fraction < 1:
            raise InputError(f"--holdout-fraction must be in (0, 1) (got {self.holdout_fraction})")
        if not self.delta > 0:
            raise InputError(f"delta must be > 0 (got {self.delta})")
        return self


@blas_single_thread
def fit_lr_annealing(
    data,
    *,
    metric: str = "loss",
    lam: float | str = LAMBDA,
    warmup: str = "peak",
    skip_fraction: float = 0.0,
    bootstrap: int = 0,
    seed: int = 0,
    ci: float = 0.95,
    holdout: str | None = None,
    holdout_fraction: float = 0.2,
    columns: dict[str, str] | None = None,
    delta: float = DELTA,
    top_k: int = 8,
) -> FitRecord:
    """Fit L0, A, alpha, C to the loss curves in `data` (a run-directory tree, a CSV/Parquet table
    with columns run, step, lr, loss, or a DataFrame).

    lam: the momentum's decay factor (the paper's 0.999), or 'auto': the value of LAMBDA_GRID whose
    fit has the lowest objective on the fitted curves (its profile is in diagnostics.lambda_profile).
    skip_fraction: points before this fraction of each curve's steps are left out; 0 (default) fits
    every point, as the authors' released fitting script does (the record's settings.skip_fraction
    says which was used). holdout: 'last-run' (fit on the other curves,
    predict the last one: the last run directory by path, or the last run to appear in a table)
    or 'tail' (fit on each curve's first 1 - holdout_fraction of steps, predict the rest).
    """
    opts = AnnealingOptions(
        bootstrap=bootstrap,
        seed=seed,
        ci=ci,
        holdout=holdout,
        lam=lam,
        warmup=warmup,
        skip_fraction=skip_fraction,
        holdout_fraction=holdout_fraction,
        delta=delta,
    ).check()
    curves, warnings, source, kind = load_curves(data, metric=metric, columns=columns)
    curves, skipped = _skip(curves, skip_fraction)
    if holdout == "last-run" and len(curves) < 2:
        raise InputError(f"--holdout last-run needs at least 2 curves (found {len(curves)})")
    fit_curves, held = _split(curves, holdout, holdout_fraction)
    n_pts = sum(c.loss.size for c in fit_curves)
    if n_pts < MIN_POINTS:
        raise InputError(
            f"lr-annealing: too few loss points to fit: {n_pts} (need at least {MIN_POINTS}; "
            f"{skipped} left out by --skip-fraction {skip_fraction:g})"
        )
    t0 = time.perf_counter()
    profile = None
    if lam == "auto":
        decay, profile = _choose_lambda(fit_curves, warmup, delta, top_k, warnings)
    else:
        decay = float(lam)  # AnnealingOptions.check: a number or 'auto'
    prob = lf.Problem(fit_curves, decay, warmup, delta)
    no_anneal = prob.s2_max <= 0
    res = lf.fit(prob, top_k=top_k, fix_C_zero=no_anneal)
    params = lf.as_params(res.x)
    warnings += _param_warnings(prob, res, params, no_anneal)
    resid = prob.residuals(res.x)
    diagnostics = huber_diagnostics(res, PARAMS, resid, delta)
    diagnostics["fit_seconds"] = time.perf_counter() - t0
    if profile:
        diagnostics["lambda_profile"] = profile
    law = AnnealingLaw(**params, lam=decay, warmup=warmup)
    intervals, boot = {}, None
    if bootstrap:
        intervals, boot = _bootstrap(prob, res.x, opts, warnings, no_anneal)
    settings = {
        "lambda": decay,
        "lambda_rule": _lambda_rule(profile),
        "delta": delta,
        "warmup": warmup,
        "skip_fraction": skip_fraction,
        "metric": metric if kind == "runs" else "loss",
        "loss_points": WINDOW_TEXT["window" if kind == "runs" and metric == "loss" else "point"],
        "holdout": holdout,
        "holdout_fraction": holdout_fraction if holdout == "tail" else None,
        "bootstrap": bootstrap,
        "seed": seed,
        "ci": ci,
        "top_k": top_k,
        "objective": "sum over all points of all curves of Huber(delta) on log L_observed - log L_predicted",
        "optimizer": "L-BFGS-B, all parameters >= 0, from the best top_k of a "
        "data-scaled grid and the authors' grid, then one polish",
    }
    conventions = {**CONVENTIONS, "lambda": decay, "warmup": warmup_text(warmup)}
    rec = pipeline.record(
        law="lr-annealing",
        approach=None,
        params=params,
        intervals=intervals,
        objective=res.fun,
        n_points=n_pts,
        warnings=warnings,
        data_sha256=data_hash(fit_curves),
        source=source,
        input=kind,
        settings=settings,
        conventions=conventions,
        columns=None,
        diagnostics=diagnostics,
        data_range=data_range(prob, fit_curves),
        curves=curve_rows(fit_curves, law, prob, resid),
        bootstrap=boot,
        holdout=holdout_report(held, law, holdout, holdout_fraction) if held and holdout else None,
        cls=LrAnnealingRecord,
    )
    return rec


# ---------------------------------------------------------------- data preparation
def _skip(curves: list[Curve], frac: float) -> tuple[list[Curve], int]:
    """Points before `frac` of each curve's steps are left out, and windows that start at update 0
    (the law's S1 is 0 there). Curves left without points are dropped."""
    out, dropped = [], 0
    for c in curves:
        keep = (c.lo >= max(1, frac * c.steps)) & (c.hi <= c.steps)
        dropped += int((~keep).sum())
        if keep.any():
            out.append(c.subset(keep))
    if not out:
        raise InputError(f"lr-annealing: no loss point left after --skip-fraction {frac:g}")
    return out, dropped


def _split(curves: list[Curve], rule: str | None, frac: float) -> tuple[list[Curve], list[Curve]]:
    if rule == "last-run":
        return curves[:-1], curves[-1:]
    if rule == "tail":
        fit, held = [], []
        for c in curves:
            late = c.hi > (1 - frac) * c.steps
            if (~late).any():
                fit.append(c.subset(~late))
            if late.any():
                held.append(c.subset(late))
        return fit, held
    return curves, []


# ---------------------------------------------------------------- the decay factor
# What a parameter stopped on a bound means, by (parameter, bound).
BOUND_WHY: dict[tuple[str, float], str] = {
    ("alpha", 0): "alpha = 0 makes A S1^-alpha a constant that L0 absorbs: A and L0 are not identified",
    ("C", 0): "the annealing term is zero: the curves show no benefit of lr decay",
    ("L0", 0): "L0 = 0 is an implausible irreducible loss: the curves are too short to pin the asymptote",
}


def _choose_lambda(
    curves: list[Curve], warmup: str, delta: float, top_k: int, warnings: list[str]
) -> tuple[float, list[dict]]:
    """The grid's lambda whose fit has the lowest objective; warns when the data hardly prefer it."""
    profile = []
    for lam in LAMBDA_GRID:
        prob = lf.Problem(curves, lam, warmup, delta)
        if prob.s2_max <= 0:
            raise InputError(
                "--lambda auto needs a curve with an lr decrease (S2 = 0 everywhere: lambda plays no part)"
            )
        r = lf.fit(prob, top_k=top_k)
        profile.append({"lambda": lam, "objective": float(r.fun), **lf.as_params(r.x)})
    best = min(profile, key=lambda row: row["objective"])
    near = [row["lambda"] for row in profile if row["objective"] <= best["objective"] * (1 + FLAT_PROFILE)]
    if best["lambda"] == LAMBDA_GRID[-1]:
        warnings.append(
            f"--lambda auto chose {best['lambda']:g}, the top of its grid: the best decay factor may lie above it"
        )
    if len(near) > 1:
        warnings.append(
            f"lambda is weakly identified: fits with lambda in [{min(near):g}, "
            f"{max(near):g}] come within {FLAT_PROFILE:.0%} of the best "
            f"objective; predictions of schedules unlike the fitted ones (e.g. cosine from constant + WSD) depend on it"
        )
    return best["lambda"], profile


def _lambda_rule(profile) -> str:
    return (
        (
            "auto: the value of "
            + ", ".join(f"{v:g}" for v in LAMBDA_GRID)
            + " with the lowest objective on the fitted curves "
            "(bootstrap resamples keep it fixed)"
        )
        if profile
        else "given (--lambda; the paper's default 0.999)"
    )


# ---------------------------------------------------------------- warnings and identification
def _param_warnings(prob, res, params: dict, no_anneal: bool) -> list[str]:
    out = []
    if no_anneal:
        out.append(
            "C is not identified: no fitted point follows an lr decrease (S2 = 0 everywhere), so the annealing term "
            "was fixed at C = 0; fit with a decaying schedule (e.g. WSD) to predict annealed schedules"
        )
    for k, v, (lo, hi) in zip(PARAMS, res.x, lf.bounds(prob, no_anneal)):
        if k == "C" and no_anneal:
            continue
        if at_bound(v, lo, hi):
            why = BOUND_WHY.get((k, lo if v - lo < hi - v else hi))
            out.append(
                f"parameter {k} stopped on its bound ({v:.6g}; bounds [{lo:.6g}, {hi:.6g}])"
                + (f": {why}" if why else "")
            )
    if not res.success:
        out.append(f"optimiser did not converge from the best start: {res.message}")
    if prob.n_curves == 1:
        out.append(
            "one curve: L0, A, alpha and C are all read from a single "
            "schedule; fit two or more (e.g. constant and WSD) for a prediction"
        )
    return out


def _bootstrap(prob, x_full, opts: AnnealingOptions, warnings: list[str], no_anneal: bool):
    """Resample whole curves with replacement (points of a curve are not independent) and refit each."""
    n = prob.n_curves
    idxs = bs.resample_indices(n, opts.bootstrap, opts.seed)
    grid = lf._rank(prob, lf.starts(prob), BOOT_TOP_K)
    anneals = np.array([prob.ws2[prob.curve == i].max() > 0 for i in range(n)])

    def one(idx):
        counts = np.bincount(idx, minlength=n)
        if not no_anneal and not anneals[counts > 0].any():
            raise FitError("the resample holds no curve with an lr decrease: C not identified")
        prob.set_curve_weights(counts)
        try:
            r = lf.fit(prob, top_k=BOOT_TOP_K, extra_starts=[x_full], fix_C_zero=no_anneal, grid=grid)
        finally:
            prob.set_curve_weights(np.ones(n))
        return lf.as_params(r.x)

    b = pipeline.bootstrap(one, idxs, seed=opts.seed, ci=opts.ci)
    distinct = len({tuple(np.bincount(i, minlength=n)) for i in idxs})
    if n < 4:
        warnings.append(
            f"the bootstrap resamples {n} curves: only {distinct} distinct resamples, so the intervals are coarse "
            "(more runs, or more schedules, give real intervals)"
        )
    if b.failed:
        warnings.append(f"{b.failed} of {opts.bootstrap} bootstrap resamples failed to fit ({b.failure_text()})")
    intervals = b.intervals()
    for k in PARAMS:
        iv = intervals.get(k)
        if iv and iv[0] > 0 and iv[1] / iv[0] > IDENTIFIED_RATIO:
            warnings.append(
                f"{k} is poorly identified: its interval [{iv[0]:.4g}, {iv[1]:.4g}] spans a factor {iv[1] / iv[0]:.3g}"
            )
        elif iv and iv[0] <= 0 < iv[1] and not (k == "C" and no_anneal):
            warnings.append(f"{k} is not identified: its interval [{iv[0]:.4g}, {iv[1]:.4g}] reaches 0")
    return intervals, b.record(
        method="resample whole curves with replacement; percentile intervals",
        starts=f"full-data optimum + the {BOOT_TOP_K} best grid points on the full data",
    )
