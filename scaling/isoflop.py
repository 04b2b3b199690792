"""Chinchilla Approaches 1 and 2: non-parametric compute-optimal allocation.

Approach 2 (IsoFLOP profiles): group runs by compute budget, fit a parabola of loss in log N per
budget, take its minimum as N_opt(C) (D_opt = C / 6 N_opt), then regress log N_opt and log D_opt
on log C: N_opt = N_coef C^a, D_opt = D_coef C^b.
Approach 1 (lower envelope): bin runs (or training-curve points) by compute, keep the lowest
loss in each bin, and regress the N and D of those envelope points on C the same way.
"""
from __future__ import annotations

import numpy as np

from scaling.common import group_by_tolerance, ols


def isoflop_minima(logN: np.ndarray, loss: np.ndarray, logC: np.ndarray, groups: np.ndarray, min_points: int = 3):
    """Per-budget parabola minima. Returns (rows, notes): rows are dicts with C, N_opt, D_opt,
    loss_opt, n_points, curvature; notes explain each budget that gave no usable minimum."""
    rows, notes = [], []
    for g in np.unique(groups):
        m = groups == g
        x, y = logN[m], loss[m]
        C = float(np.exp(logC[m].mean()))
        if np.unique(np.round(x, 9)).size < min_points:
            notes.append(f"budget C~{C:.3g}: only {np.unique(np.round(x, 9)).size} distinct N (< {min_points}); skipped")
            continue
        c2, c1, c0 = np.polyfit(x, y, 2)
        if c2 <= 0:
            notes.append(f"budget C~{C:.3g}: loss vs log N is not convex (no minimum); skipped")
            continue
        xs = -c1 / (2 * c2)
        if xs < x.min() or xs > x.max():
            notes.append(f"budget C~{C:.3g}: parabola minimum at N={np.exp(xs):.3g} lies outside the sampled N range; skipped")
            continue
        n_opt = float(np.exp(xs))
        rows.append({"C": C, "N_opt": n_opt, "D_opt": C / (6.0 * n_opt), "loss_opt": float(c0 - c1 * c1 / (4 * c2)), "n_points": int(m.sum()), "curvature": float(c2)})
    return rows, notes


def frontier_fit(C: np.ndarray, N_opt: np.ndarray, D_opt: np.ndarray) -> dict[str, float]:
    """Power laws N_opt = N_coef C^a and D_opt = D_coef C^b by OLS in log space."""
    (ln_nc, a), r2n = ols(np.log(C), np.log(N_opt))
    (ln_dc, b), r2d = ols(np.log(C), np.log(D_opt))
    return {"a": float(a), "b": float(b), "N_coef": float(np.exp(ln_nc)), "D_coef": float(np.exp(ln_dc)), "r2_N": r2n, "r2_D": r2d}


def approach2(N, D, loss, C, *, budget_tol: float = 0.15, min_points: int = 3, groups: np.ndarray | None = None):
    """Approach 2 on arrays. Returns (params or None, per-budget rows, notes, groups)."""
    logN, logC = np.log(N), np.log(C)
    if groups is None:
        groups = group_by_tolerance(C, budget_tol)
    rows, notes = isoflop_minima(logN, np.asarray(loss, float), logC, groups, min_points)
    if len(rows) < 2:
        return None, rows, notes, groups
    arr = {k: np.array([r[k] for r in rows]) for k in ("C", "N_opt", "D_opt")}
    return frontier_fit(arr["C"], arr["N_opt"], arr["D_opt"]), rows, notes, groups


def envelope_points(N, D, loss, C, n_bins: int = 20):
    """Lower envelope: in each log-spaced compute bin, the point with the lowest loss."""
    logC = np.log(C)
    edges = np.linspace(logC.min(), logC.max() + 1e-12, n_bins + 1)
    idx = np.clip(np.digitize(logC, edges) - 1, 0, n_bins - 1)
    rows = []
    for k in range(n_bins):
        m = np.flatnonzero(idx == k)
        if m.size == 0:
            continue
        j = m[np.argmin(np.asarray(loss)[m])]
        rows.append({"C": float(C[j]), "N_opt": float(N[j]), "D_opt": float(D[j]), "loss_opt": float(loss[j]), "n_points": int(m.size)})
    # keep only points on the envelope proper: loss must decrease as compute grows
    out, best = [], np.inf
    for r in rows:
        if r["loss_opt"] < best:
            out.append(r)
            best = r["loss_opt"]
    return out


def approach1(N, D, loss, C, *, n_bins: int = 20):
    """Approach 1 on arrays. Returns (params or None, envelope rows)."""
    rows = envelope_points(np.asarray(N, float), np.asarray(D, float), np.asarray(loss, float), np.asarray(C, float), n_bins)
    if len(rows) < 2 or np.unique([r["N_opt"] for r in rows]).size < 2:
        return None, rows
    arr = {k: np.array([r[k] for r in rows]) for k in ("C", "N_opt", "D_opt")}
    return frontier_fit(arr["C"], arr["N_opt"], arr["D_opt"]), rows
