"""Helpers shared by the fits: compute column, subsetting, log-space OLS, identification checks."""
from __future__ import annotations

import numpy as np

from scaling.errors import InputError

EXTRAPOLATION_WARN_FACTOR = 100.0  # predictions beyond 100x the largest fitted compute are flagged


def compute_C(df, compute: str | None = None, n_kind: str = "total") -> np.ndarray:
    """Compute per run under the convention `compute` (see scaling.conventions); without one, the
    legacy rule: the `flops` column where valid, else 6 N D."""
    if compute is not None:
        from scaling.conventions import compute_column

        return compute_column(df, compute, n_kind)
    c6 = 6.0 * df["N"].to_numpy(float) * df["D"].to_numpy(float)
    if "flops" in df.columns:
        f = df["flops"].to_numpy(float)
        return np.where(np.isfinite(f) & (f > 0), f, c6)
    return c6


def compute_grid(C: np.ndarray) -> list[float]:
    """Powers of ten from the smallest fitted compute to 100x beyond the largest: where derived
    optima are reported by default."""
    lo, hi = int(np.ceil(np.log10(C.min()))), int(np.ceil(np.log10(C.max()))) + 2
    return [float(10.0**k) for k in range(lo, hi + 1)]


def extrapolation_warning(at_compute, C: np.ndarray) -> str | None:
    """The warning for derived optima asked for far beyond the largest fitted compute, else None."""
    cmax = float(np.max(C))
    if at_compute and max(at_compute) > EXTRAPOLATION_WARN_FACTOR * cmax:
        return f"derived predictions extrapolate up to {max(at_compute) / cmax:.3g}x beyond the largest fitted compute ({cmax:.3g} FLOPs)"
    return None


def at_bound(v: float, lo: float, hi: float) -> bool:
    """Whether a fitted parameter stopped on (within rounding of) an end of its box."""
    return min(v - lo, hi - v) <= 1e-6 * (1 + abs(v))


def huber_diagnostics(res, names, resid: np.ndarray, delta: float) -> dict:
    """The optimiser's diagnostics plus the fitted theta and the log residuals' size (RMS, max,
    share within the Huber delta) of a Huber-type fit."""
    out = res.to_diagnostics()
    out.update({
        "theta": dict(zip(names, map(float, res.x))),
        "residual_log_rms": float(np.sqrt(np.mean(resid**2))),
        "residual_log_max_abs": float(np.max(np.abs(resid))),
        "frac_within_delta": float(np.mean(np.abs(resid) <= delta)),
    })
    return out


def drop_highest(df, k: int):
    """Drop the k highest-loss rows (Epoch drops 5 outliers from the 245 extracted points)."""
    if k < 0:
        raise InputError(f"--drop-highest must be >= 0 (got {k})")
    if k == 0:
        return df
    if k >= len(df):
        raise InputError(f"--drop-highest {k} would drop all {len(df)} points")
    keep = df["loss"].rank(method="first", ascending=False) > k
    return df[keep].reset_index(drop=True)


def holdout_split(df, fraction: float, key: str = "N"):
    """Split off the largest runs: every row with `key` >= its (1 - fraction) quantile (>= 1 row).
    Returns (train, held_out)."""
    if not 0 < fraction < 1:
        raise InputError(f"holdout fraction must be in (0, 1) (got {fraction})")
    v = df[key].to_numpy(float)
    n_out = max(1, int(round(fraction * len(df))))
    thresh = np.sort(v)[-n_out]
    mask = v >= thresh
    return df[~mask].reset_index(drop=True), df[mask].reset_index(drop=True)


def holdout_by_compute(df, C: np.ndarray, fraction: float, budget_tol: float = 0.15):
    """Hold out the largest-compute runs: the top compute group when the runs form 3+ budgets
    (an IsoFLOP design: a whole budget is what a study extrapolates to), else the runs with C at
    or above the (1 - fraction) quantile. Returns (train, held, train_C, held_C, rule)."""
    if not 0 < fraction < 1:
        raise InputError(f"holdout fraction must be in (0, 1) (got {fraction})")
    C = np.asarray(C, dtype=float)
    groups = group_by_tolerance(C, budget_tol)
    top = groups == groups.max()
    if np.unique(groups).size >= 3 and top.sum() >= 2:
        mask, rule = top, f"the largest compute budget (C ~ {float(np.exp(np.log(C[top]).mean())):.3g}, {int(top.sum())} runs)"
    else:
        n_out = max(1, int(round(fraction * len(C))))
        mask = C >= np.sort(C)[-n_out]
        rule = f"runs with compute >= the {1 - fraction:.0%} quantile ({int(mask.sum())} runs)"
    return (df[~mask].reset_index(drop=True), df[mask].reset_index(drop=True), C[~mask], C[mask], rule)


def ols(X: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """(Weighted) least squares y ~ [1, X] b. Returns (coefficients incl. intercept, R^2)."""
    X = np.atleast_2d(np.asarray(X, dtype=float))
    y = np.asarray(y, dtype=float)
    if X.shape[0] != len(y):
        X = X.T
    A = np.column_stack([np.ones(len(y)), X])
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    sw = np.sqrt(w)
    coef, *_ = np.linalg.lstsq(A * sw[:, None], y * sw, rcond=None)
    resid = y - A @ coef
    ybar = float(w @ y / w.sum())
    ss = float(w @ (y - ybar) ** 2)
    r2 = 1.0 - float(w @ resid**2) / ss if ss > 0 else float("nan")
    return coef, r2


def distinct(values: np.ndarray, rtol: float = 1e-6) -> int:
    """Number of distinct values up to a relative tolerance (log scale)."""
    lv = np.sort(np.log(np.asarray(values, dtype=float)))
    if lv.size == 0:
        return 0
    return int(1 + np.sum(np.diff(lv) > rtol))


def identification_warnings(N: np.ndarray, D: np.ndarray) -> list[str]:
    """Warn when the design cannot separate the N and D terms."""
    out = []
    nN, nD = distinct(N), distinct(D)
    if nN < 2:
        out.append("not identified: all runs have the same N, so A and alpha cannot be estimated (E absorbs the N term)")
    elif nN < 3:
        out.append(f"weakly identified: only {nN} distinct N values for A, alpha and E")
    if nD < 2:
        out.append("not identified: all runs have the same D, so B and beta cannot be estimated (E absorbs the D term)")
    elif nD < 3:
        out.append(f"weakly identified: only {nD} distinct D values for B, beta and E")
    if nN >= 2 and nD >= 2:
        r = np.corrcoef(np.log(N), np.log(D))[0, 1]
        if abs(r) > 0.995:
            out.append(f"weakly identified: log N and log D are collinear (corr {r:.4f}), e.g. a fixed tokens-per-parameter ratio; alpha and beta trade off")
    return out


def group_by_tolerance(values: np.ndarray, rel_tol: float) -> np.ndarray:
    """Cluster positive values whose logs lie within log(1+rel_tol) of a cluster's densest point.

    Greedy mode-seeking: repeatedly take the point with the most neighbours within the window,
    make it and its (unassigned) neighbours a group. Works both for exact sweep budgets and for
    noisy extracted data (Epoch's IsoFLOP points). Returns integer labels ordered by value.
    """
    lv = np.log(np.asarray(values, dtype=float))
    w = np.log1p(rel_tol)
    labels = np.full(lv.size, -1)
    nxt = 0
    while (labels < 0).any():
        free = np.flatnonzero(labels < 0)
        d = np.abs(lv[free][:, None] - lv[free][None, :]) <= w
        counts = d.sum(1)
        centre = free[int(np.argmax(counts))]
        members = free[np.abs(lv[free] - lv[centre]) <= w]
        labels[members] = nxt
        nxt += 1
    # relabel in increasing order of the group's mean value
    means = np.array([lv[labels == g].mean() for g in range(nxt)])
    order = np.argsort(means)
    remap = np.empty(nxt, dtype=int)
    remap[order] = np.arange(nxt)
    return remap[labels]
