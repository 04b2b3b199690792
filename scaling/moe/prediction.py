"""The loss of one MoE run under a fitted MoE law, with a prediction interval: bootstrap parameter
draws x the fit's resampled log residuals (`scaling.laws.prediction` does the same for approach 3)."""

from __future__ import annotations

import numpy as np

from scaling.core.bootstrap import interval
from scaling.laws.moe import law_from_samples

RESIDUAL_DRAWS = 25


def bootstrap_law(rec):
    """The law with the record's bootstrap samples as parameter arrays (None without samples)."""
    s = (rec.get("bootstrap") or {}).get("samples") or {}
    return law_from_samples(rec["settings"]["law"], s) if s else None


def predict_run_loss(rec, ci: float, seed: int = 0, **point) -> dict:
    """The loss of one run (N, D, G or N, E) with a prediction interval: bootstrap parameter draws
    x the fit's resampled log residuals (residual scatter only without bootstrap samples)."""
    law = rec.law()
    args = (point["N"], point["E"]) if rec["settings"]["law"] == "clark" else (point["N"], point["D"], point["G"])
    loss = float(law.predict(*args))
    res = np.asarray((rec.get("diagnostics") or {}).get("residuals_log") or [0.0], dtype=float)
    rng = np.random.default_rng(seed)
    draws_law = bootstrap_law(rec)
    if draws_law is None:
        return {
            "loss": loss,
            "interval": interval(loss * np.exp(rng.choice(res, size=5000)), ci),
            "interval_kind": "residual scatter only (the fit has no bootstrap samples)",
        }
    with np.errstate(all="ignore"):
        p = np.asarray(draws_law.predict(*args), dtype=float)
    p = p[np.isfinite(p)]
    draws = (p[:, None] * np.exp(rng.choice(res, size=(p.size, RESIDUAL_DRAWS)))).ravel()
    return {
        "loss": loss,
        "interval": interval(draws, ci),
        "parameter_interval": interval(p, ci),
        "interval_kind": "prediction interval (parameter bootstrap + residual scatter of single runs)",
    }
