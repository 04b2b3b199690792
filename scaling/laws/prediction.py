"""Loss predictions with prediction intervals from an approach-3 fit record.

A prediction interval must cover a *new run's* measured loss, not only the law's mean: it combines
the parameter uncertainty (the record's bootstrap samples) with the scatter of single runs around
the law (the fit's log residuals, resampled). Without bootstrap samples it has only the residual
part, and says so.
"""

from __future__ import annotations

import numpy as np

from scaling.core.bootstrap import interval
from scaling.laws.loss import ChinchillaLaw, DataConstrainedLaw

CORE = ("E", "A", "B", "alpha", "beta")
RESIDUAL_DRAWS = 25  # residual draws per parameter sample (200 samples -> 5,000 draws)
INTERVAL_KIND = "prediction interval (parameter bootstrap + residual scatter of single runs)"


def _keys(rec) -> tuple[str, ...]:
    if not data_constrained(rec):
        return CORE
    return CORE + ("R_D_star",) + (("R_N_star",) if (rec.get("params") or {}).get("R_N_star") is not None else ())


def data_constrained(rec) -> bool:
    return (rec.get("settings") or {}).get("law") == "data-constrained"


def _samples(rec) -> dict | None:
    s = (rec.get("bootstrap") or {}).get("samples") or {}
    keys = _keys(rec)
    if not all(k in s for k in keys):
        return None
    n = min(len(s[k]) for k in keys)
    out = {k: np.asarray([np.nan if v is None else v for v in s[k][:n]], dtype=float) for k in keys}
    ok = np.all([np.isfinite(v) for v in out.values()], axis=0)
    return {k: v[ok] for k, v in out.items()} if ok.any() else None


def residuals(rec) -> np.ndarray:
    r = (rec.get("diagnostics") or {}).get("residuals_log")
    if r:
        return np.asarray(r, dtype=float)
    rms = (rec.get("diagnostics") or {}).get("residual_log_rms")
    return np.asarray([-rms, rms], dtype=float) if rms else np.zeros(1)


def loss_draws(rec, N, D, seed: int = 0, U: float | None = None) -> dict:
    """The draws behind a prediction: {point, param_draws (bootstrap laws at N, D; None without
    samples), draws (param_draws x resampled log residuals: where a new run's loss lands),
    interval_kind}. `predict_loss` summarises them; the accuracy chain pushes them on through
    the sigmoid."""
    law = rec.law()
    extra = {"U": float(U)} if U and data_constrained(rec) else {}
    point = float(law.predict(float(N), float(D), **extra))
    res = residuals(rec)
    rng = np.random.default_rng(seed)
    s = _samples(rec)
    if s is not None:
        with np.errstate(all="ignore"):
            cls = DataConstrainedLaw if "R_D_star" in s else ChinchillaLaw
            param_draws = cls(**s).predict(float(N), float(D), **extra)
        param_draws = param_draws[np.isfinite(param_draws)]
        eps = rng.choice(res, size=(param_draws.size, RESIDUAL_DRAWS))
        return {
            "point": point,
            "param_draws": param_draws,
            "draws": (param_draws[:, None] * np.exp(eps)).ravel(),
            "interval_kind": INTERVAL_KIND,
        }
    return {
        "point": point,
        "param_draws": None,
        "draws": point * np.exp(rng.choice(res, size=5000)),
        "interval_kind": "residual scatter only (the fit has no bootstrap samples: parameter uncertainty not included)",
    }


def predict_loss(rec, N, D, ci: float = 0.95, seed: int = 0, U: float | None = None) -> dict:
    """Point prediction and prediction interval of the loss of one run with N (the record's kind)
    parameters trained on D tokens (drawn from U unique tokens: used by a data-constrained law).
    Returns {loss, interval, interval_kind, parameter_interval}."""
    d = loss_draws(rec, N, D, seed, U)
    out = {"loss": d["point"], "interval_kind": d["interval_kind"], "ci": ci}
    if d["param_draws"] is not None:
        out["parameter_interval"] = interval(d["param_draws"], ci)
    out["interval"] = interval(d["draws"], ci)
    return out
