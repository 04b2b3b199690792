"""Steps to a target loss, read from a run's metrics.jsonl (for the critical-batch fit).

McCandlish's S(B) is the number of optimizer updates a run with batch B needs to first reach a
target loss, not its total steps. This module turns a loss curve into that number:

- x axis: optimizer updates the logged loss reflects. The trainer's training `loss` at step s is
  the mean over the steps since the previous record (prev, s], and the loss of step j is computed
  on the model after j - 1 updates, so the record sits at x = (prev + s - 1) / 2 updates.
  `val_loss` is evaluated after s updates: x = s.
- smoothing: local linear regression on log(steps) over the records within a factor
  (1 + bandwidth) of each record (default bandwidth 0.1 for the noisy training loss, 0 = none for
  val_loss, measured on fixed held-out tokens). A trailing EMA would delay every crossing by
  ~decay/(1-decay) records, adding the same steps to every run, which inflates S_min and biases
  B_crit = E_min/S_min low; a centred moving average over k records has no lag but, early in a
  run where the curve bends within k records, delays crossings (measured on the synthetic curves:
  +6-8% on B_crit for targets crossed ~10 records into a run, with k = 5). A window fixed in log steps is a
  few records early, many late, and a linear fit in log steps barely bends with the curve
  (<= 0.1% on noiseless synthetic curves).
- crossing: the first record whose smoothed loss is <= the target, linearly interpolated in x
  against the previous record. A curve already below the target at its first record is
  "unresolved" (the crossing happened before anything was logged), never a guess.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

METRICS = ("loss", "val_loss")
DEFAULT_SMOOTH = {"loss": 0.1, "val_loss": 0.0}  # bandwidth: relative half-width of the window in steps
AUTO_FRACTIONS = (0.9, 0.5, 0.25)  # auto targets: the floor run's loss at these fractions of its steps
NOISE_WINDOW = 1.25  # grad_noise_scale records within [S/1.25, 1.25 S] of the crossing count as "near"


@dataclass
class Curve:
    """One run's smoothed loss curve and its gradient-noise-scale records."""

    x: np.ndarray  # optimizer updates each record's loss reflects
    loss: np.ndarray  # smoothed
    raw: np.ndarray
    noise_x: np.ndarray  # updates at which grad_noise_scale was measured (one entry per measurement)
    noise: np.ndarray

    @property
    def best(self) -> float:
        return float(self.loss.min())


def smooth_log_linear(x: np.ndarray, y: np.ndarray, bandwidth: float) -> np.ndarray:
    """Local linear regression of y on log x over the records within a factor (1 + bandwidth)
    of each record's x (uniform weights), evaluated at that x. The window is fixed in log
    steps, so it is a few records early in a run (where the loss moves fast) and many later;
    a linear fit in log x has no lag and almost no curvature bias on power-law-like curves."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if bandwidth <= 0 or y.size < 3:
        return y.copy()
    s = np.log(np.maximum(x, 0.5))
    w = np.log1p(bandwidth)
    lo = np.searchsorted(s, s - w, side="left")
    hi = np.searchsorted(s, s + w, side="right")
    c = [np.concatenate([[0.0], np.cumsum(v)]) for v in (np.ones_like(s), s, s * s, y, s * y)]
    n, S1, S2, Y, SY = (ci[hi] - ci[lo] for ci in c)
    var = S2 - S1 * S1 / np.maximum(n, 1)
    ok = (n >= 3) & (var > 1e-12 * np.maximum(S2, 1.0))
    slope = np.where(ok, (SY - S1 * Y / np.maximum(n, 1)) / np.where(ok, var, 1.0), 0.0)
    fit = Y / np.maximum(n, 1) + slope * (s - S1 / np.maximum(n, 1))
    return np.where(ok, fit, y)


def read_curve(path: Path, metric: str = "loss", bandwidth: float | None = None) -> tuple[Curve | None, str | None]:
    """Curve from a metrics.jsonl, or (None, why) when it has no usable `metric` records.
    Torn lines (a killed writer) are skipped; a repeated step keeps its last record."""
    bandwidth = DEFAULT_SMOOTH[metric] if bandwidth is None else bandwidth
    by_step: dict[int, dict] = {}
    try:
        text = Path(path).read_text()
    except OSError as exc:
        return None, f"unreadable metrics.jsonl ({exc})"
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            step = int(rec["step"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
        by_step[step] = rec
    steps = sorted(s for s in by_step if s > 0)
    xs, ys, nx, nv = [], [], [], []
    prev, last_noise = 0, None
    for s in steps:
        rec = by_step[s]
        v = _finite(rec.get(metric))
        if v is not None:
            xs.append((prev + s - 1) / 2.0 if metric == "loss" else float(s))
            ys.append(v)
        g = _finite(rec.get("grad_noise_scale"))
        if g is not None and g > 0 and g != last_noise:  # later records repeat the last measurement
            nx.append(float(s))
            nv.append(g)
            last_noise = g
        if _finite(rec.get("loss")) is not None:
            prev = s  # the training-loss window restarts at every record
    if not ys:
        return None, f"metrics.jsonl has no '{metric}' records"
    raw, x = np.asarray(ys), np.asarray(xs)
    return Curve(
        x=x, loss=smooth_log_linear(x, raw, bandwidth), raw=raw, noise_x=np.asarray(nx), noise=np.asarray(nv)
    ), None


def _finite(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None


def first_crossing(x: np.ndarray, y: np.ndarray, target: float) -> tuple[float | None, str]:
    """(x at which y first reaches `target`, status): status 'ok', 'never' (y stays above) or
    'before-first-record' (y[0] is already <= target, so the crossing is not resolved)."""
    below = np.flatnonzero(y <= target)
    if below.size == 0:
        return None, "never"
    i = int(below[0])
    if i == 0:
        return None, "before-first-record"
    x0, x1, y0, y1 = x[i - 1], x[i], y[i - 1], y[i]
    return float(x0 + (y0 - target) / (y0 - y1) * (x1 - x0)), "ok"


def auto_targets(curves_by_batch: list[list[Curve]], fractions=AUTO_FRACTIONS) -> list[float]:
    """Targets every batch size of one model reaches, late enough to be past warmup and the
    initial fast drop: the (smoothed) loss of the "floor run" at `fractions` of its steps.

    The floor run is the best run (over learning rates) of the batch size whose best loss is the
    highest; every other batch size's best run gets lower, so all reach each target. Rounded up
    to 4 decimals; targets not below every run's first record (unresolvable) are dropped."""
    cells = [min(cell, key=lambda c: c.best) for cell in curves_by_batch]
    run = max(cells, key=lambda c: c.best)
    top = min(float(c.loss[0]) for cell in curves_by_batch for c in cell)
    out = set()
    for f in fractions:
        v = float(np.interp(f * run.x[-1], run.x, run.loss))
        t = float(np.ceil(max(v, run.best) * 1e4) / 1e4)
        if t < top:
            out.add(t)
    return sorted(out)


def noise_near(curve: Curve, steps: float) -> float | None:
    """Median grad_noise_scale of the run's measurements within a factor NOISE_WINDOW of `steps`
    updates; else its measurement nearest in log steps if within a factor 2; else None."""
    if curve.noise.size == 0 or not steps > 0:
        return None
    near = (curve.noise_x >= steps / NOISE_WINDOW) & (curve.noise_x <= steps * NOISE_WINDOW)
    if near.any():
        return float(np.median(curve.noise[near]))
    d = np.abs(np.log(curve.noise_x) - np.log(steps))
    j = int(np.argmin(d))
    return float(curve.noise[j]) if d[j] <= np.log(2.0) else None
