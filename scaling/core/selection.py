"""Which runs a fit sees: the highest-loss points dropped, the largest runs held out, runs grouped
into budgets by a relative tolerance, distinct values counted."""

from __future__ import annotations

import numpy as np

from scaling.core.errors import InputError


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
        mask, rule = (
            top,
            f"the largest compute budget (C ~ {float(np.exp(np.log(C[top]).mean())):.3g}, {int(top.sum())} runs)",
        )
    else:
        n_out = max(1, int(round(fraction * len(C))))
        mask = C >= np.sort(C)[-n_out]
        rule = f"runs with compute >= the {1 - fraction:.0%} quantile ({int(mask.sum())} runs)"
    return (df[~mask].reset_index(drop=True), df[mask].reset_index(drop=True), C[~mask], C[mask], rule)


def distinct(values: np.ndarray, rtol: float = 1e-6) -> int:
    """Number of distinct values up to a relative tolerance (log scale)."""
    lv = np.sort(np.log(np.asarray(values, dtype=float)))
    if lv.size == 0:
        return 0
    return int(1 + np.sum(np.diff(lv) > rtol))


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
