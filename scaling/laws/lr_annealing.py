"""The learning-rate annealing law (Tissue et al. 2024): the loss of a whole training curve from its lr schedule.

    L(s) = L0 + A * S1(s)^(-alpha) - C * S2(s)

Conventions (stated in every record's `conventions`):
- s counts completed optimizer updates; `lr[k]` (k = 0..T-1) is the lr of update k + 1, i.e.
  `rundir.schedules.lr_at(k, ...)`. L(s) is the loss of the weights after s updates (s >= 1).
- S1(s) = sum_{k<s} lr[k]: the forward area.
- m[0] = 0, m[k] = lambda * m[k-1] + (lr[k-1] - lr[k]); S2(s) = sum_{k<s} m[k]: the annealing area
  with momentum (lambda = 0.999 by default).
- Warmup (paper section 3.4): the steps before the lr first reaches its maximum count at that
  maximum (`warmup="peak"`); `warmup="actual"` uses the lrs as given.
A and C are in the lr's own units: a record predicts schedules given in the same units (a raw lr).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaling.core.bootstrap import interval
from scaling.core.errors import InputError

LAMBDA = 0.999
PARAMS = ("L0", "A", "alpha", "C")
WARMUP_RULES = ("peak", "actual")


def warmup_length(lr: np.ndarray) -> int:
    """Steps before the lr first reaches its maximum when they rise to it (0 without a warmup)."""
    lr = np.asarray(lr, dtype=float)
    if lr.size == 0:
        return 0
    first_max = int(np.argmax(lr))
    head = lr[: first_max + 1]
    return first_max if first_max and np.all(np.diff(head) >= 0) else 0


def effective_lr(lr, warmup: str = "peak") -> np.ndarray:
    """The lrs the areas are computed from: warmup steps raised to the peak under `warmup="peak"`."""
    lr = np.asarray(lr, dtype=float).copy()
    if warmup == "peak":
        w = warmup_length(lr)
        if w:
            lr[:w] = lr[w]
    return lr


def areas(lr, lam: float = LAMBDA, warmup: str = "peak") -> tuple[np.ndarray, np.ndarray]:
    """(S1, S2) after s = 0..T updates (arrays of length T + 1; S1[0] = S2[0] = 0)."""
    eff = effective_lr(lr, warmup)
    drops = np.zeros_like(eff)
    drops[1:] = eff[:-1] - eff[1:]
    m = _momentum(drops, lam)
    s1 = np.concatenate([[0.0], np.cumsum(eff)])
    s2 = np.concatenate([[0.0], np.cumsum(m)])
    return s1, s2


def _momentum(drops: np.ndarray, lam: float) -> np.ndarray:
    """m[k] = lam * m[k-1] + drops[k], as a linear filter (no Python loop over steps)."""
    if lam == 0:
        return drops.copy()
    from scipy.signal import lfilter  # deferred: scipy.signal is slow to import

    return lfilter([1.0], [1.0, -lam], drops)


@dataclass(frozen=True)
class AnnealingLaw:
    """L(s) = L0 + A S1^-alpha - C S2 with its decay factor and warmup rule (see the module docstring)."""

    L0: float
    A: float
    alpha: float
    C: float
    lam: float = LAMBDA
    warmup: str = "peak"

    def curve(self, lr) -> np.ndarray:
        """Predicted loss after s = 1..T updates of the schedule `lr` (length T)."""
        s1, s2 = areas(lr, self.lam, self.warmup)
        return self.at_areas(s1[1:], s2[1:])

    def at_areas(self, s1, s2) -> np.ndarray:
        s1, s2 = np.asarray(s1, dtype=float), np.asarray(s2, dtype=float)
        with np.errstate(divide="ignore"):
            return self.L0 + self.A * s1 ** (-self.alpha) - self.C * s2

    def final(self, lr) -> float:
        return float(self.curve(lr)[-1])


def law_from_record(rec) -> AnnealingLaw:
    p, st = rec["params"], rec.get("settings") or {}
    return AnnealingLaw(
        float(p["L0"]),
        float(p["A"]),
        float(p["alpha"]),
        float(p["C"]),
        lam=float(st.get("lambda", LAMBDA)),
        warmup=st.get("warmup", "peak"),
    )


@dataclass
class CurvePrediction:
    """A predicted loss curve: loss[s-1] after s updates, with a pointwise bootstrap band when the
    record has bootstrap samples (lo/hi None otherwise)."""

    steps: np.ndarray
    lr: np.ndarray
    loss: np.ndarray
    lo: np.ndarray | None
    hi: np.ndarray | None
    ci: float
    n_samples: int
    warnings: list[str]

    @property
    def final(self) -> float:
        return float(self.loss[-1])

    @property
    def final_interval(self) -> list[float] | None:
        return None if self.lo is None or self.hi is None else [float(self.lo[-1]), float(self.hi[-1])]

    def window_mean(self, window: int) -> float:
        """Mean of the last `window` steps' losses as a trainer logs it: the weights after
        T - window .. T - 1 updates (metrics.jsonl's last `loss`)."""
        T = len(self.loss)
        w = max(1, min(window, T - 1))
        return float(np.mean(self.loss[T - w - 1 : T - 1]))


def predict_curve(rec, lr, *, ci: float = 0.95) -> CurvePrediction:
    """The loss curve a fit record predicts for the schedule `lr` (lr of updates 1..T, in the fit's
    units), with the bootstrap band of the record's parameter samples and warnings when the
    schedule reaches beyond what the fit saw."""
    lr = np.asarray(lr, dtype=float)
    if lr.ndim != 1 or lr.size < 1 or not np.all(np.isfinite(lr)) or np.any(lr < 0):
        raise InputError("the schedule's lr must be a 1-d array of finite values >= 0, one per step")
    law = law_from_record(rec)
    s1, s2 = areas(lr, law.lam, law.warmup)
    loss = law.at_areas(s1[1:], s2[1:])
    lo = hi = None
    n = 0
    samples = (rec.get("bootstrap") or {}).get("samples") or {}
    if all(k in samples for k in PARAMS):
        P = np.array([[np.nan if v is None else v for v in samples[k]] for k in PARAMS], dtype=float)
        P = P[:, np.all(np.isfinite(P), axis=0)]
        n = P.shape[1]
        if n >= 2:
            with np.errstate(divide="ignore", invalid="ignore"):
                draws = P[0][:, None] + P[1][:, None] * s1[None, 1:] ** (-P[2][:, None]) - P[3][:, None] * s2[None, 1:]
            lo, hi = interval(draws, ci, axis=0)
    return CurvePrediction(np.arange(1, lr.size + 1), lr, loss, lo, hi, ci, n, _range_warnings(rec, lr, s1, s2))


def _range_warnings(rec, lr, s1, s2) -> list[str]:
    """Where the schedule leaves the fitted data: more forward area, more annealing, another peak lr."""
    out = []
    rng = rec.get("data_range") or {}
    s1_max = (rng.get("S1") or [None, None])[1]
    if s1_max and s1[-1] > 1.5 * s1_max:
        out.append(
            f"the schedule's forward area S1 = {s1[-1]:.4g} is "
            f"{s1[-1] / s1_max:.3g}x the largest fitted ({s1_max:.4g}): "
            "the prediction extrapolates the power law in S1"
        )
    s2_max = (rng.get("S2") or [None, None])[1]
    if s2_max is not None and s2[-1] > 1.5 * max(s2_max, 0.0) and s2[-1] > 0:
        out.append(
            f"the schedule's annealing area S2 = {s2[-1]:.4g} exceeds the largest fitted ({s2_max:.4g}) by over 1.5x: "
            "the linear -C*S2 term is extrapolated"
        )
    peaks = rng.get("peak_lr")
    if peaks and peaks[0] and peaks[1]:
        p = float(np.max(lr))
        if p < peaks[0] / 1.05 or p > peaks[1] * 1.05:
            out.append(
                f"the schedule's peak lr {p:.4g} is outside the fitted "
                f"runs' peak lrs [{peaks[0]:.4g}, {peaks[1]:.4g}]: "
                "the law is fitted per model, batch and peak lr (Tissue et al. fit one peak lr at a time)"
            )
    return out
