"""Bootstrap by resampling runs (rows) with replacement: intervals for any fitted quantity.

Deterministic given the seed: resample indices come from numpy's PCG64 seeded once, in order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scaling.core.errors import FitError


def resample_indices(n: int, n_boot: int, seed: int, groups: np.ndarray | None = None) -> list[np.ndarray]:
    """`n_boot` index arrays of length n. With `groups`, resample within each group (stratified),
    so every IsoFLOP budget / (N, D) cell keeps its size."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_boot):
        if groups is None:
            out.append(rng.integers(0, n, size=n))
        else:
            parts = []
            for g in np.unique(groups):
                members = np.flatnonzero(groups == g)
                parts.append(members[rng.integers(0, members.size, size=members.size)])
            out.append(np.sort(np.concatenate(parts)))
    return out


def resample_clusters(labels: np.ndarray, n_boot: int, seed: int) -> list[np.ndarray]:
    """Resample whole clusters (e.g. runs, each contributing many curve points) with replacement:
    the points of one run are not independent, so they are never resampled separately."""
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels)
    uniq = np.unique(labels)
    members = [np.flatnonzero(labels == u) for u in uniq]
    return [np.concatenate([members[j] for j in rng.integers(0, uniq.size, size=uniq.size)]) for _ in range(n_boot)]


# What a degenerate resample may raise; anything else is a bug and must fail the command.
DEGENERATE = (FitError, np.linalg.LinAlgError)


def run_bootstrap(
    fit_one: Callable[[np.ndarray], dict[str, float] | None],
    indices: list[np.ndarray],
    reasons: dict[str, int] | None = None,
) -> tuple[dict[str, list[float]], int]:
    """Apply `fit_one(idx) -> params or None` to each resample; collect samples per parameter.
    Returns (samples, n_failed). A resample whose data is degenerate (fit_one returns None or
    raises FitError / LinAlgError) is counted, and its reason tallied into `reasons`; any other
    exception is a programming error and propagates."""
    samples: dict[str, list[float]] = {}
    failed = 0
    for idx in indices:
        try:
            p = fit_one(idx)
            why = "no fit"
        except DEGENERATE as exc:
            p, why = None, str(exc) or type(exc).__name__
        if p is None:
            failed += 1
            if reasons is not None:
                reasons[why] = reasons.get(why, 0) + 1
            continue
        for k, v in p.items():
            samples.setdefault(k, []).append(float(v))
    return samples, failed


def interval(samples, ci: float = 0.95, *, axis: int | None = None, spread_only: bool = False):
    """The percentile interval at level `ci` of bootstrap draws, ignoring non-finite ones: the one
    place every fit, the plan, the plots and the dashboard turn samples into an interval.

    axis=None: [lo, hi] of all draws, or None with fewer than 2 finite draws (and with
    `spread_only`, None when they are all equal: a quantity the resamples cannot move has no
    interval worth printing). axis=k: a band, the (lo, hi) arrays along axis k (e.g. one curve per
    resample -> its pointwise band)."""
    lo_q, hi_q = 100 * (1 - ci) / 2, 100 * (1 + ci) / 2
    arr = np.asarray(samples, dtype=float)
    if axis is not None:
        arr = np.where(np.isfinite(arr), arr, np.nan)
        return np.nanpercentile(arr, lo_q, axis=axis), np.nanpercentile(arr, hi_q, axis=axis)
    arr = arr[np.isfinite(arr)]
    if arr.size < 2 or (spread_only and np.ptp(arr) == 0):
        return None
    return [float(np.percentile(arr, lo_q)), float(np.percentile(arr, hi_q))]


def percentile_intervals(samples: dict[str, list[float]], ci: float = 0.95) -> dict[str, list[float]]:
    """`interval` of each parameter's samples (parameters with fewer than 2 finite draws left out)."""
    out = {}
    for k, v in samples.items():
        iv = interval(v, ci)
        if iv is not None:
            out[k] = iv
    return out


def standard_errors(samples: dict[str, list[float]]) -> dict[str, float]:
    out = {}
    for k, v in samples.items():
        arr = np.asarray(v, dtype=float)
        arr = arr[np.isfinite(arr)]
        if arr.size >= 2:
            out[k] = float(arr.std(ddof=1))
    return out
