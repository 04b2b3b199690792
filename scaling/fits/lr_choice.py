"""The learning rate an lr sweep chooses: the vertex of a parabola in log lr fitted to the final losses.

A grid's best point is only as fine as the grid (a factor 2 apart); the vertex of a parabola in
log lr interpolates between grid points. The parabola goes through the best grid point and its two
neighbours (the three nearest the edge when the best is at one), as benchmarks/mup_transfer.py
measures μP's transfer: loss curves in log lr are asymmetric (they rise steeply past the optimum),
so a parabola through the whole grid would be pulled away from the minimum by its far ends. The
vertex is trusted only where the parabola has a minimum (opens upward) inside the grid: a vertex
outside the grid is an extrapolation, and a parabola that opens downward has no minimum at all.
Then the best grid point is chosen, with a warning that says why (and which way to extend the grid).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

MIN_POINTS = 3  # a parabola needs three lrs


def choose_lr(lrs: list[float], losses: list[float | None]) -> dict:
    """{lr, method: vertex|best, best_lr, best_loss, vertex_lr, coef, fit_lrs, warning} of one lr sweep.

    Runs without a finite loss (failed, diverged) are left out of the fit and named in the warning.
    `coef` is (a, b, c) of loss = a x^2 + b x + c with x = ln(lr) through the best point and its
    neighbours (None with fewer than 3 points).
    """
    if len(lrs) != len(losses):
        raise ValueError(f"{len(lrs)} lrs but {len(losses)} losses")
    pts = sorted((float(lr), float(v)) for lr, v in zip(lrs, losses) if v is not None and math.isfinite(v))
    if not pts:
        raise ValueError("no run of the lr sweep has a finite final loss: nothing to choose from")
    lost = [float(lr) for lr, v in zip(lrs, losses) if v is None or not math.isfinite(v)]
    shown = ", ".join(f"{x:.3g}" for x in sorted(lost))
    notes = [f"left out {len(lost)} lr(s) without a finite loss ({shown})"] if lost else []
    best_lr, best_loss = min(pts, key=lambda p: p[1])
    out: dict[str, Any] = {"best_lr": best_lr, "best_loss": best_loss, "vertex_lr": None, "coef": None, "fit_lrs": None}
    if len(pts) < MIN_POINTS:
        why = f"{len(pts)} lr(s) with a finite loss: too few for a parabola (need {MIN_POINTS})"
        return out | {"lr": best_lr, "method": "best", "warning": "; ".join([*notes, why + ": the best grid point"])}
    x = np.log([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    i = min(max(int(np.argmin(y)) - 1, 0), len(pts) - MIN_POINTS)  # the best point and its neighbours
    a, b, c = (float(v) for v in np.polyfit(x[i : i + MIN_POINTS], y[i : i + MIN_POINTS], 2))
    out["coef"] = [a, b, c]
    out["fit_lrs"] = [p[0] for p in pts[i : i + MIN_POINTS]]
    if not a > 0:
        why = "the parabola in log lr opens downward (no minimum): the best grid point"
        return out | {"lr": best_lr, "method": "best", "warning": "; ".join([*notes, why])}
    vertex = -b / (2 * a)
    out["vertex_lr"] = math.exp(vertex)
    if not x[0] <= vertex <= x[-1]:
        side, lo_hi = ("below", pts[0][0]) if vertex < x[0] else ("above", pts[-1][0])
        why = (
            f"the parabola's vertex (lr {math.exp(vertex):.3g}) lies {side} the grid's "
            f"{'smallest' if side == 'below' else 'largest'} lr {lo_hi:.3g}: the best grid point; "
            f"extend the grid {side} it"
        )
        return out | {"lr": best_lr, "method": "best", "warning": "; ".join([*notes, why])}
    return out | {"lr": math.exp(vertex), "method": "vertex", "warning": "; ".join(notes) or None}
