"""What `scalelab predict` shares across law families: the result (`Prediction`), a record's bootstrap draws
and residuals, the prediction interval, the extrapolation factor and the output's columns and summary.

Interval: a prediction interval for one new run (scaling.laws.prediction's recipe): every bootstrap law
of the record at the point times a resampled log residual of its fit (additive for accuracy); without
bootstrap samples the residual scatter alone, said. Where the data has a measured value:
rel_error = (predicted - measured) / measured and `inside`. A point outside the fitted range (N, D, C, U,
G, E; the loss range for accuracy) gets its extrapolation factor max(x / hi, lo / x) > 1, the largest over
its inputs (1 inside). Each family's `predict` (scaling.fits.family.LawFamily) builds on these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from scaling.core.bootstrap import interval
from scaling.core.conventions import N_KINDS, compute_column
from scaling.core.errors import InputError
from scaling.laws.prediction import RESIDUAL_DRAWS

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Prediction:
    """The rows (a DataFrame: inputs, then per quantity predicted/lo/hi/measured/rel_error/inside,
    then extrapolation_factor), the summary per quantity, and what the reader has to know."""

    df: pd.DataFrame
    quantities: list[str]
    summary: dict
    conventions: dict
    interval_kind: str
    warnings: list[str] = field(default_factory=list)


def n_kind(rec) -> str:
    kind = (rec.get("conventions") or {}).get("n_kind") or rec.get("n_kind") or "total"
    return kind if kind in N_KINDS else "total"


def samples(rec_part, keys) -> dict | None:
    """Bootstrap draws of `keys` as (S, 1) arrays (finite rows only), or None."""
    s = (rec_part.get("bootstrap") or {}).get("samples") or {}
    if not keys or not all(k in s for k in keys):
        return None
    n = min(len(s[k]) for k in keys)
    arr = {k: np.asarray([np.nan if v is None else v for v in s[k][:n]], dtype=float) for k in keys}
    ok = np.all([np.isfinite(v) for v in arr.values()], axis=0)
    return {k: v[ok][:, None] for k, v in arr.items()} if ok.sum() >= 2 else None


def residuals(rec_part, key: str = "residuals_log") -> np.ndarray:
    diag = rec_part.get("diagnostics") or {}
    r = diag.get(key)
    if r:
        return np.asarray(r, dtype=float)
    rms = diag.get("residual_log_rms")
    return np.asarray([-rms, rms], dtype=float) if rms else np.zeros(1)


def log_intervals(
    point: np.ndarray, draws: np.ndarray | None, resid: np.ndarray, ci: float, rng
) -> tuple[np.ndarray, np.ndarray]:
    """lo, hi of each point: its bootstrap draws (S, P) (or the point alone) times resampled exp(log residuals)."""
    lo, hi = np.full(point.size, np.nan), np.full(point.size, np.nan)
    for j in range(point.size):
        base = point[j : j + 1] if draws is None else draws[:, j]
        base = base[np.isfinite(base)]
        if not base.size:
            continue
        k = RESIDUAL_DRAWS if draws is not None else 5000
        d = (base[:, None] * np.exp(rng.choice(resid, size=(base.size, k)))).ravel()
        iv = interval(d, ci)
        if iv:
            lo[j], hi[j] = iv
    return lo, hi


def interval_kind(has_draws: bool, additive: bool = False) -> str:
    scatter = "residual scatter of single runs" if not additive else "the accuracy fit's residuals"
    if has_draws:
        return f"prediction interval (parameter bootstrap + {scatter})"
    return f"{scatter} only (the fit has no bootstrap samples: parameter uncertainty not included)"


def extrapolation(values: dict, ranges: dict) -> np.ndarray | None:
    """Per row, the largest factor by which an input lies outside its fitted range (1 inside)."""
    out: np.ndarray | None = None
    for k, x in values.items():
        r = ranges.get(k)
        if not r or x is None:
            continue
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.maximum(np.maximum(x / r[1], r[0] / x), 1.0)
        f = np.where(np.isfinite(f), f, 1.0)
        out = f if out is None else np.maximum(out, f)
    return out


def add_columns(out, q: str, single: bool, pred, lo, hi, measured) -> None:
    """Add one quantity's columns: predicted, <q>_lo, <q>_hi, measured, rel_error, inside (those
    but the bounds suffixed _<q> when there are several quantities)."""
    sfx = "" if single else f"_{q}"
    out[f"predicted{sfx}"] = pred
    out[f"{q}_lo"], out[f"{q}_hi"] = lo, hi
    if measured is None:
        measured = np.full(len(pred), np.nan)
    measured = np.asarray(measured, dtype=float)
    out[f"measured{sfx}"] = measured
    with np.errstate(divide="ignore", invalid="ignore"):
        out[f"rel_error{sfx}"] = np.where(np.isfinite(measured), (pred - measured) / measured, np.nan)
    has = np.isfinite(measured) & np.isfinite(lo) & np.isfinite(hi)
    out[f"inside{sfx}"] = [bool(lo[i] <= measured[i] <= hi[i]) if has[i] else None for i in range(len(pred))]


def _summary(df, quantities: list[str], single: bool) -> dict:
    out = {}
    f = df["extrapolation_factor"].to_numpy(float) if "extrapolation_factor" in df else np.ones(len(df))
    ext = np.isfinite(f) & (f > 1.0 + 1e-9)
    for q in quantities:
        sfx = "" if single else f"_{q}"
        rel = df[f"rel_error{sfx}"].to_numpy(float)
        m = np.isfinite(rel)
        ins = [v for v in df[f"inside{sfx}"] if v is not None]
        s = {
            "n_points": int(len(df)),
            "n_measured": int(m.sum()),
            "n_extrapolated": int(ext.sum()),
            "max_extrapolation_factor": float(np.max(f)) if len(f) else None,
        }
        if m.any():
            s.update(
                {
                    "mean_abs_rel_error": float(np.mean(np.abs(rel[m]))),
                    "max_abs_rel_error": float(np.max(np.abs(rel[m]))),
                    "mean_rel_error": float(np.mean(rel[m])),
                }
            )
        if ins:
            s["coverage"] = float(np.mean(ins))
            s["n_inside"] = int(sum(ins))
        out[q] = s
    return out


def finish(frame, quantities, conventions, kind, warnings, ci) -> Prediction:
    single = len(quantities) == 1
    summary = _summary(frame, quantities, single)
    summary["ci"] = ci
    return Prediction(
        df=frame, quantities=quantities, summary=summary, conventions=conventions, interval_kind=kind, warnings=warnings
    )


def input_columns(df, roles) -> pd.DataFrame:
    """The output's leading columns: run/task when present, then the roles used."""
    import pandas as pd  # deferred: pandas is slow to import

    out = pd.DataFrame(index=df.index)
    for c in ("run", "task"):
        if c in df.columns:
            out[c] = df[c]
    for r in roles:
        if r in df.columns:
            out[r] = df[r].to_numpy(float)
    return out.reset_index(drop=True)


def compute_for(rec, df, n_kind: str, warnings: list[str]):
    """C per row in the record's convention, or None (said) when the data cannot give it."""
    conv = (rec.get("conventions") or {}).get("compute")
    if not conv or "D" not in df.columns:
        return None
    if conv == "6ND_active_nonembed":
        return 6.0 * df["N"].to_numpy(float) * df["D"].to_numpy(float)
    try:
        return compute_column(df, conv, n_kind)
    except InputError as exc:
        warnings.append(f"compute not checked against the fitted range: {exc}")
        return None
