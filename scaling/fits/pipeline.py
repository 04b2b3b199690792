"""The steps every law's fitter runs, written once: validate -> fit -> bootstrap -> holdout -> record.

A fitter (`fit_chinchilla`, `fit_kaplan`, `fit_batch_lr`, `fit_critical_batch`, the data-constrained
law) keeps only what is its own: the fit of one sample, how runs are resampled, what a held-out
run is compared on. The rest is here:

    pipeline.FitOptions(bootstrap, seed, ci, holdout).check()  # validate: shared options first
    ds = pipeline.load(data, columns, n_kind)                  # then inputs.validate(ds, roles, ...)
    boot = pipeline.bootstrap(fit_one, indices, seed=..., ci=...)
    boot.intervals(), boot.record(method=...)                  # the record's intervals and `bootstrap`
    pipeline.holdout_report(n, rule, "loss", rel=pipeline.rel_errors(pred, obs))
    pipeline.record(law=..., bootstrap=boot.record(...), holdout=report, **fields)

Intervals everywhere (fits, plan, plots, dashboard, main job) come from `bootstrap.interval`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from scaling.core import bootstrap as bs
from scaling.core.bootstrap import interval  # noqa: F401  (re-exported: the one interval helper)
from scaling.data import inputs
from scaling.fits.options import HOLDOUT_RULES, FitOptions  # noqa: F401  (pipeline.FitOptions: the shared options)
from scaling.fits.record import FitRecord, _clean, make_record


def load(data, columns: dict[str, str] | None = None, n_kind: str = "total") -> inputs.Dataset:
    """A Dataset as given, or read from a DataFrame / table file / run-directory tree."""
    return data if isinstance(data, inputs.Dataset) else inputs.load(data, columns, n_kind)


# ---------------------------------------------------------------- bootstrap
@dataclass
class Bootstrap:
    """The outcome of refitting every resample: samples per parameter and the failures, explained."""

    n: int
    seed: int
    ci: float
    samples: dict[str, list[float]]
    failed: int
    reasons: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def _pick(self, keys) -> dict[str, list[float]]:
        return self.samples if keys is None else {k: self.samples[k] for k in keys if k in self.samples}

    def intervals(self, keys=None) -> dict[str, list[float]]:
        """Percentile interval of each parameter (of `keys`, when given)."""
        return bs.percentile_intervals(self._pick(keys), self.ci)

    def standard_errors(self, keys=None) -> dict[str, float]:
        return bs.standard_errors(self._pick(keys))

    def failure_text(self) -> str:
        """'3x reason; 1x other reason', most frequent first."""
        return "; ".join(f"{n}x {why}" for why, n in sorted(self.reasons.items(), key=lambda kv: -kv[1]))

    def record(
        self,
        *,
        keys=None,
        method: str | None = None,
        starts: str | None = None,
        reasons_key: str | None = "failure_reasons",
        seconds: bool = True,
        standard_errors: bool = True,
    ) -> dict:
        """The record's `bootstrap` section: n, failed (and why), seed, ci, method, timing,
        standard errors and the samples of `keys` (all parameters by default)."""
        out: dict = {"n": self.n, "failed": self.failed}
        if reasons_key:
            out[reasons_key] = self.reasons
        out.update({"seed": self.seed, "ci": self.ci})
        if method is not None:
            out["method"] = method
        if starts is not None:
            out["starts_per_resample"] = starts
        if seconds:
            out["seconds"] = self.seconds
        if standard_errors:
            out["standard_errors"] = self.standard_errors(keys)
        out["samples"] = self._pick(keys)
        return out


def bootstrap(
    fit_one: Callable[[np.ndarray], dict[str, float] | None], indices: list[np.ndarray], *, seed: int, ci: float
) -> Bootstrap:
    """Refit every resample (`fit_one(idx) -> params`, see `bootstrap.run_bootstrap` for what a
    failed resample is) and keep its samples, failures and their reasons, and the time taken."""
    t = time.perf_counter()
    reasons: dict[str, int] = {}
    samples, failed = bs.run_bootstrap(fit_one, indices, reasons)
    return Bootstrap(
        n=len(indices),
        seed=seed,
        ci=ci,
        samples=samples,
        failed=failed,
        reasons=reasons,
        seconds=time.perf_counter() - t,
    )


def interval_fields(draws: dict, ci: float) -> dict[str, list[float]]:
    """{name + '_interval': interval} of each quantity's draws (e.g. N_opt of every resample's
    law), for the ones with an interval."""
    return {f"{k}_interval": v for k, v in bs.percentile_intervals(draws, ci).items()}


def fit_fields(params, intervals, objective, diagnostics, derived, settings, boot=None) -> dict:
    """The fields one fit hands to its record, in the order every fitter writes them (`bootstrap` only
    when it resampled)."""
    out = {
        "params": params,
        "intervals": intervals,
        "objective": objective,
        "diagnostics": diagnostics,
        "derived": derived,
        "settings": settings,
    }
    if boot:
        out["bootstrap"] = boot
    return out


# ---------------------------------------------------------------- holdout
def rel_errors(predicted, observed) -> np.ndarray:
    """(predicted - observed) / observed, elementwise."""
    pred, obs = np.asarray(predicted, dtype=float), np.asarray(observed, dtype=float)
    return (pred - obs) / obs


def error_summary(rel, *, signed: bool = False) -> dict:
    """mean and max |relative error| (and the signed mean, which shows a bias) of held-out points."""
    rel = np.asarray(rel, dtype=float)
    out = {"mean_abs_rel_error": float(np.mean(np.abs(rel))), "max_abs_rel_error": float(np.max(np.abs(rel)))}
    if signed:
        out["mean_rel_error"] = float(np.mean(rel))
    return out


def holdout_report(
    n_points: int, rule: str, quantity: str, rel=None, *, signed: bool = False, note: str | None = None, **details
) -> dict:
    """The record's `holdout` section, one shape for every law: how many runs were held out and
    by which rule, the quantity compared, its error summary (None when no error could be computed,
    with a `note` saying why) and law-specific `details` (points, C_min, ...)."""
    out: dict = {"n_points": n_points, "rule": rule, "quantity": quantity}
    if rel is None:
        out.update({"note": note, "mean_abs_rel_error": None, "max_abs_rel_error": None})
    else:
        out.update(error_summary(rel, signed=signed))
        if note:
            out["note"] = note
    out.update(details)
    return out


# ---------------------------------------------------------------- record
def record(
    *, bootstrap: dict | None = None, holdout: dict | None = None, cls: type[FitRecord] = FitRecord, **fields
) -> FitRecord:
    """The fit record: the required keys (see FitRecord.REQUIRED) and any others, then the
    bootstrap and holdout sections when the fit has them."""
    rec = make_record(**fields)
    if bootstrap:
        rec["bootstrap"] = bootstrap
    if holdout is not None:
        rec["holdout"] = _clean(holdout)
    return rec if cls is FitRecord else cls(rec)
