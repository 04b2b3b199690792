"""Compute-optimal MoE shapes under a fitted law: used by the fit's `derived` rows and by `plan`.

Compute is C = 6 N D with N the active non-embedding parameters (the record's convention
`6ND_active_nonembed`; Krajewski et al.'s c_f = 6, with the router's parameters counted in N).
- Krajewski: at each candidate granularity G the law is Chinchilla's with A = g / G^gamma + a,
  so N_opt, D_opt and the loss are closed-form; the best G is the candidate with the lowest loss.
  Against the dense law (G = 1) the MoE at G reaches the dense compute-optimal loss of
  (A(1) / A(G))^(1/alpha) x its compute: the `compute_multiplier` (constant in C, since both
  laws share c, alpha, b, beta). Krajewski et al. add a routing cost per token that grows with
  E x G (c_r = 14 FLOPs per router parameter); it is what makes their optimal G finite and
  growing with compute. Here the router counts 6 FLOPs per parameter like every other weight,
  so with gamma > 0 the finest candidate wins (the plan keeps to the fitted range of G).
- Clark: no data term, so at compute C the runs' own tokens D are kept, N = C / (6 D), and the
  best expert count is the candidate with the lowest loss; its gain over dense is Clark's
  effective parameter count N_bar / N (the dense size, and so compute at fixed D, that matches it).
"""

from __future__ import annotations

import numpy as np

EXPRESSIBLE_MAX = 256  # the largest granularity / expert count the candidate grids go to


def candidates(data_values, *, integer: bool = False, beyond: bool = False) -> tuple[list[float], float | None]:
    """(candidates within the data's range, the next one beyond it): powers of two and the data's
    own values between its smallest and largest (whole numbers when `integer`)."""
    vals = np.unique(np.asarray(data_values, dtype=float))
    lo, hi = float(vals.min()), float(vals.max())
    pows = [float(2**k) for k in range(0, int(np.log2(EXPRESSIBLE_MAX)) + 1)]
    inside = sorted(
        {v for v in pows if lo - 1e-9 <= v <= hi + 1e-9} | {float(round(v)) if integer else float(v) for v in vals}
    )
    nxt = next((v for v in pows if v > hi + 1e-9), None)
    return inside, nxt


def krajewski_at(law, C: float, G) -> dict:
    """N_opt, D_opt and loss at compute C and granularity G (arrays when `law` holds draws)."""
    with np.errstate(all="ignore"):
        n, d = law.compute_optimal(C, G)
        return {"G": G, "N_opt": n, "D_opt": d, "loss": law.predict(n, d, G)}


def krajewski_best(law, C: float, grid: list[float]) -> dict:
    """The candidate granularity with the lowest compute-optimal loss at C (point-estimate law)."""
    rows = [krajewski_at(law, C, g) for g in grid]
    best = min(rows, key=lambda r: float(r["loss"]))
    return {k: float(v) for k, v in best.items()}


def compute_multiplier(law, G):
    """Dense (G = 1) compute needed to reach the MoE's compute-optimal loss, per unit of MoE compute."""
    with np.errstate(all="ignore"):
        return (law.n_coef(1.0) / law.n_coef(G)) ** (1.0 / law.alpha)


def clark_at(law, N, E) -> dict:
    with np.errstate(all="ignore"):
        return {"E": E, "loss": law.predict(N, E), "effective_params": law.effective_params(N, E)}


def clark_best(law, N: float, grid: list[float]) -> dict:
    rows = [clark_at(law, N, e) for e in grid]
    best = min(rows, key=lambda r: float(r["loss"]))
    return {k: float(v) for k, v in best.items()}


def dense_loss_at_compute(law, C: float):
    """Krajewski's dense (G = 1) compute-optimal loss at C."""
    with np.errstate(all="ignore"):
        return law.optimal_loss(C, 1.0)
