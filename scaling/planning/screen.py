"""`study next --screen refit`: choose among a few candidate batches of runs by their refit forecast
(scaling.planning.forecast.preposterior) rather than by the Fisher update that proposed them.

The Fisher update is linear in the law's parameters; where the law is far from linear over what the
runs still allow (the data-constrained law, an exponent not identified) it forecasts widths the
refit does not reach and so ranks runs on a wrong forecast. The screen keeps the Fisher greedy as
the generator of batches (it is fast and searches the whole menu) and refits only a few of them: each
batch's forecast widths at the target, its criterion the weighted mean over targets of
(width after / today)² (the Fisher criterion's variance ratio, measured by refits), its score
-log(criterion) per FLOP (the information it buys per FLOP: additive over independent batches,
unlike 1 - criterion). Every batch is forecast with the same seed (the same simulated truths: common
random numbers), so their difference is less noisy than either forecast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaling.planning.forecast import Forecast, Model, preposterior


@dataclass
class Screened:
    """One batch: its `label` (where it came from), candidate indices, FLOPs, refit forecast,
    `criterion` (weighted mean of squared width ratios; 1.0 = no narrowing) and `score`
    (-log criterion per FLOP; -inf where the forecast failed)."""

    label: str
    chosen: list[int]
    spent: float
    forecast: Forecast
    criterion: float
    score: float


def criterion_of(ratio: np.ndarray, weights) -> float:
    """Weighted mean over targets of (width after / today)²; inf where a weighted target has no forecast."""
    w = np.asarray(weights, float)
    r2 = np.square(np.asarray(ratio, float))
    if not np.all(np.isfinite(r2[w > 0])):
        return float("inf")
    return float(np.sum(w[w > 0] * r2[w > 0]) / w.sum())


def screen(
    model: Model,
    X_old: np.ndarray,
    y_old: np.ndarray,
    X_cand: np.ndarray,
    batches: dict[str, tuple[list[int], float]],
    draws: np.ndarray,
    point: np.ndarray,
    residuals: np.ndarray,
    *,
    weights,
    futures: int = 4,
    resamples: int = 20,
    ci: float = 0.95,
    seed: int = 0,
) -> list[Screened]:
    """Each batch (label -> (indices into X_cand, FLOPs)) forecast by refits, best score first.
    Batches with the same runs are forecast once (the first label is kept)."""
    out, seen = [], set()
    for label, (chosen, spent) in batches.items():
        key = tuple(sorted(chosen))
        if not chosen or key in seen:
            continue
        seen.add(key)
        fc = preposterior(
            model,
            X_old,
            y_old,
            X_cand[list(chosen)],
            draws,
            point,
            residuals,
            futures=futures,
            resamples=resamples,
            ci=ci,
            seed=seed,
        )
        crit = criterion_of(fc.width_ratio(), weights)
        score = -np.log(crit) / spent if np.isfinite(crit) and crit > 0 and spent > 0 else -np.inf
        out.append(Screened(label, list(chosen), float(spent), fc, crit, float(score)))
    return sorted(out, key=lambda s: -s.score)


def isoflop_batch(N: np.ndarray, flops: np.ndarray, budget: float, max_runs: int) -> tuple[list[int], float]:
    """A ladder-like batch: up to `max_runs` candidates near one compute (budget / max_runs each, down
    to half of it, a quarter where too few lie there), spread evenly in log N, within `budget`."""
    per = budget / max_runs
    for lo in (0.5, 0.25):
        band = np.flatnonzero((flops <= per * (1 + 1e-9)) & (flops >= lo * per))
        if len(band) >= min(3, max_runs):
            break
    if len(band) == 0:
        return [], 0.0
    band = band[np.argsort(np.log(N[band]), kind="stable")]
    pick = np.unique(np.linspace(0, len(band) - 1, min(max_runs, len(band))).round().astype(int))
    chosen, spent = [], 0.0
    for i in band[pick]:
        if spent + flops[i] <= budget * (1 + 1e-9):
            chosen.append(int(i))
            spent += float(flops[i])
    return chosen, spent
