"""Chinchilla Approaches 1 and 2: non-parametric compute-optimal allocation.

Approach 2 (IsoFLOP profiles): group runs by compute budget, fit a parabola of loss in log N per
budget, take its minimum as N_opt(C) and D_opt = C / k(N_opt), with k = C/D the tokens' cost in
the record's compute convention (6 N for 6ND; the trainer's FLOPs per token otherwise, read off
the budget's own runs), then regress log N_opt and log D_opt on log C: N_opt = N_coef C^a,
D_opt = D_coef C^b. The regression is ordinary least squares over budgets by default, as Hoffmann
et al. 2022 and Porian et al. 2024 fit it (`weights="ols"`); `weights="inverse-variance"` weights
each budget by the precision of its vertex (scalelab's refinement; records written before the
choice existed used it).
Approach 1 (lower envelope): bin runs (or training-curve points) by compute, keep the lowest
loss in each bin, and regress the N and D of those envelope points on C the same way.
"""

from __future__ import annotations

import numpy as np

from scaling.core.errors import FitError
from scaling.core.regression import ols
from scaling.core.selection import group_by_tolerance
from scaling.fits.chinchilla.options import FRONTIER_WEIGHTS  # noqa: F401  (approach 2's weightings)

MIN_SIZES = 5  # fewer sizes per budget leave the parabola (3 coefficients) barely constrained


def _vertex_gradient(c2: float, c1: float) -> np.ndarray:
    """d(vertex)/d(c2, c1, c0) for vertex = -c1 / (2 c2)."""
    return np.array([c1 / (2 * c2 * c2), -1 / (2 * c2), 0.0])


def isoflop_minima(
    logN: np.ndarray,
    loss: np.ndarray,
    logC: np.ndarray,
    groups: np.ndarray,
    min_points: int = 3,
    logD: np.ndarray | None = None,
):
    """Per-budget parabola minima. Returns (rows, notes): rows are dicts with C, N_opt, D_opt,
    loss_opt, n_points, n_sizes, curvature, edge (best run at the smallest or largest size) and
    the vertex's design terms for weighting; notes ({C, reason, detail}) explain each budget that
    gave no usable minimum."""
    rows, notes = [], []
    for g in np.unique(groups):
        m = groups == g
        x, y = logN[m], loss[m]
        C = float(np.exp(logC[m].mean()))
        n_sizes = int(np.unique(np.round(x, 9)).size)
        if n_sizes < min_points:
            notes.append({"C": C, "reason": f"fewer than {min_points} model sizes", "detail": f"{n_sizes} distinct N"})
            continue
        X = np.column_stack([x * x, x, np.ones_like(x)])
        coef, *_ = np.linalg.lstsq(X, y, rcond=None)
        c2, c1, c0 = (float(v) for v in coef)
        if c2 <= 0:
            notes.append({"C": C, "reason": "loss vs log N not convex", "detail": f"curvature {c2:.3g}"})
            continue
        xs = -c1 / (2 * c2)
        if xs < x.min() or xs > x.max():
            notes.append(
                {
                    "C": C,
                    "reason": "minimum outside the sampled sizes",
                    "detail": f"vertex at N={np.exp(xs):.3g}, sizes {np.exp(x.min()):.3g}-{np.exp(x.max()):.3g}",
                }
            )
            continue
        n_opt = float(np.exp(xs))
        if logD is not None:  # D = C / k: interpolate log k (tokens' cost) along the budget's runs
            order = np.argsort(x)
            logk = (logC[m] - logD[m])[order]
            d_opt = C / float(np.exp(np.interp(xs, x[order], logk)))
        else:
            d_opt = C / (6.0 * n_opt)
        best = int(np.argmin(y))
        resid = y - X @ coef
        rows.append(
            {
                "C": C,
                "N_opt": n_opt,
                "D_opt": d_opt,
                "loss_opt": float(c0 - c1 * c1 / (4 * c2)),
                "n_points": int(m.sum()),
                "n_sizes": n_sizes,
                "curvature": c2,
                "edge": bool(x[best] <= x.min() or x[best] >= x.max()),
                "best_run_N": float(np.exp(x[best])),
                "rss": float(resid @ resid),
                "dof": int(m.sum()) - 3,
                "_var_unit": float(_vertex_gradient(c2, c1) @ np.linalg.pinv(X.T @ X) @ _vertex_gradient(c2, c1)),
            }
        )
    return rows, notes


def vertex_weights(rows: list[dict]) -> tuple[np.ndarray | None, float | None]:
    """1 / var(log N_opt) per budget from the delta method with the residual variance pooled over
    budgets (parabola residuals of all budgets; a single budget's 5 points give a poor variance).
    Returns (weights or None when no residual degrees of freedom, pooled variance)."""
    dof = sum(r["dof"] for r in rows)
    if dof <= 0:
        return None, None
    s2 = sum(r["rss"] for r in rows) / dof
    var = np.array([max(r["_var_unit"] * s2, 1e-12) for r in rows])
    return 1.0 / var, s2


def frontier_fit(
    C: np.ndarray, N_opt: np.ndarray, D_opt: np.ndarray, weights: np.ndarray | None = None
) -> dict[str, float]:
    """Power laws N_opt = N_coef C^a and D_opt = D_coef C^b by (weighted) OLS in log space."""
    (ln_nc, a), r2n = ols(np.log(C), np.log(N_opt), weights)
    (ln_dc, b), r2d = ols(np.log(C), np.log(D_opt), weights)
    return {
        "a": float(a),
        "b": float(b),
        "N_coef": float(np.exp(ln_nc)),
        "D_coef": float(np.exp(ln_dc)),
        "r2_N": r2n,
        "r2_D": r2d,
    }


def note_text(n: dict) -> str:
    return f"budget C~{n['C']:.3g}: {n['reason']} ({n['detail']})"


def approach2(
    N,
    D,
    loss,
    C,
    *,
    budget_tol: float = 0.15,
    min_points: int = 3,
    groups: np.ndarray | None = None,
    weighted: bool = False,
):
    """Approach 2 on arrays: the frontier by OLS over budgets, or weighted by 1/var(log N_opt) with
    `weighted`. Returns (params or None, per-budget rows (with each vertex's standard error
    log_N_opt_se when the parabolas leave residual degrees of freedom), notes, groups)."""
    logN, logC = np.log(N), np.log(C)
    if groups is None:
        groups = group_by_tolerance(C, budget_tol)
    rows, notes = isoflop_minima(logN, np.asarray(loss, float), logC, groups, min_points, logD=np.log(D))
    if len(rows) < 2:
        return None, rows, notes, groups
    arr = {k: np.array([r[k] for r in rows]) for k in ("C", "N_opt", "D_opt")}
    w, _ = vertex_weights(rows)
    params = frontier_fit(arr["C"], arr["N_opt"], arr["D_opt"], w if weighted else None)
    params["weighted"] = bool(weighted and w is not None)
    for r, wi in zip(rows, w if w is not None else [None] * len(rows)):
        r["log_N_opt_se"] = None if wi is None else float(1 / np.sqrt(wi))
    return params, rows, notes, groups


def approach2_resample(N, D, loss, C, groups, weighted: bool = False) -> dict:
    """One bootstrap refit; a resample with fewer than 2 usable budgets raises FitError naming why."""
    params, rows, notes, _ = approach2(N, D, loss, C, groups=groups, weighted=weighted)
    if params is None:
        why = "; ".join(sorted({f"{n['reason']} at C~{n['C']:.2g}" for n in notes})) or "fewer than 2 budgets"
        raise FitError(f"fewer than 2 budgets with an interior minimum ({why})")
    params.pop("weighted", None)
    return params


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
        rows.append(
            {
                "C": float(C[j]),
                "N_opt": float(N[j]),
                "D_opt": float(D[j]),
                "loss_opt": float(loss[j]),
                "n_points": int(m.size),
            }
        )
    # keep only points on the envelope proper: loss must decrease as compute grows
    out, best = [], np.inf
    for r in rows:
        if r["loss_opt"] < best:
            out.append(r)
            best = r["loss_opt"]
    return out


def approach1(N, D, loss, C, *, n_bins: int = 20):
    """Approach 1 on arrays. Returns (params or None, envelope rows)."""
    rows = envelope_points(
        np.asarray(N, float), np.asarray(D, float), np.asarray(loss, float), np.asarray(C, float), n_bins
    )
    if len(rows) < 2 or np.unique([r["N_opt"] for r in rows]).size < 2:
        return None, rows
    arr = {k: np.array([r[k] for r in rows]) for k in ("C", "N_opt", "D_opt")}
    return frontier_fit(arr["C"], arr["N_opt"], arr["D_opt"]), rows
