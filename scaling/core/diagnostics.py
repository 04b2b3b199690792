"""What a fit reports about itself: identification of the law's terms, parameters stopped on a bound,
the size of the residuals, and where derived predictions extrapolate."""

from __future__ import annotations

import numpy as np

from scaling.core.selection import distinct

EXTRAPOLATION_WARN_FACTOR = 100.0  # predictions beyond 100x the largest fitted compute are flagged


def compute_grid(C: np.ndarray) -> list[float]:
    """Powers of ten from the smallest fitted compute to 100x beyond the largest: where derived
    optima are reported by default."""
    lo, hi = int(np.ceil(np.log10(C.min()))), int(np.ceil(np.log10(C.max()))) + 2
    return [float(10.0**k) for k in range(lo, hi + 1)]


def extrapolation_warning(at_compute, C: np.ndarray) -> str | None:
    """The warning for derived optima asked for far beyond the largest fitted compute, else None."""
    cmax = float(np.max(C))
    if at_compute and max(at_compute) > EXTRAPOLATION_WARN_FACTOR * cmax:
        return (
            f"derived predictions extrapolate up to {max(at_compute) / cmax:.3g}x "
            f"beyond the largest fitted compute ({cmax:.3g} FLOPs)"
        )
    return None


def at_bound(v: float, lo: float, hi: float) -> bool:
    """Whether a fitted parameter stopped on (within rounding of) an end of its box."""
    return min(v - lo, hi - v) <= 1e-6 * (1 + abs(v))


def huber_diagnostics(res, names, resid: np.ndarray, delta: float) -> dict:
    """The optimiser's diagnostics plus the fitted theta and the log residuals' size (RMS, max,
    share within the Huber delta) of a Huber-type fit."""
    out = res.to_diagnostics()
    out.update(
        {
            "theta": dict(zip(names, map(float, res.x))),
            "residual_log_rms": float(np.sqrt(np.mean(resid**2))),
            "residual_log_max_abs": float(np.max(np.abs(resid))),
            "frac_within_delta": float(np.mean(np.abs(resid) <= delta)),
        }
    )
    return out


def identification_warnings(N: np.ndarray, D: np.ndarray) -> list[str]:
    """Warn when the design cannot separate the N and D terms."""
    out = []
    nN, nD = distinct(N), distinct(D)
    if nN < 2:
        out.append(
            "not identified: all runs have the same N, so A and alpha cannot be estimated (E absorbs the N term)"
        )
    elif nN < 3:
        out.append(f"weakly identified: only {nN} distinct N values for A, alpha and E")
    if nD < 2:
        out.append("not identified: all runs have the same D, so B and beta cannot be estimated (E absorbs the D term)")
    elif nD < 3:
        out.append(f"weakly identified: only {nD} distinct D values for B, beta and E")
    if nN >= 2 and nD >= 2:
        r = np.corrcoef(np.log(N), np.log(D))[0, 1]
        if abs(r) > 0.995:
            out.append(
                f"weakly identified: log N and log D are collinear (corr {r:.4f}), "
                "e.g. a fixed tokens-per-parameter ratio; alpha and beta trade off"
            )
    return out
