"""The loss of one MoE run under a fitted MoE law, with a prediction interval: bootstrap parameter
draws x the fit's resampled log residuals (`scaling.laws.prediction` does the same for approach 3); and what
`scalelab predict` needs of a MoE record (`roles`, `model`, `read`, `check`: scaling.fits.loss_prediction)."""

from __future__ import annotations

import numpy as np

from scaling.core.bootstrap import interval
from scaling.data.columns import parse_columns
from scaling.data.moe_inputs import ROLES, check_shapes, load_moe
from scaling.fits.prediction import samples
from scaling.laws.moe import CLARK_PARAMS, KRAJEWSKI_PARAMS, law_from_params, law_from_samples

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


def _clark(rec) -> bool:
    return (rec.get("settings") or {}).get("law") == "clark"


def roles(rec) -> tuple[str, ...]:
    """Clark's law reads N, E; Krajewski's N, D, G."""
    return ("N", "E") if _clark(rec) else ("N", "D", "G")


def model(rec, df, law_roles):
    """(point predictions (P,), bootstrap draws (S, P) or None) of a MoE record at the rows of df."""
    st, p = rec.get("settings") or {}, rec["params"]
    x = {r: df[r].to_numpy(float) for r in law_roles}
    clark = _clark(rec)
    names = CLARK_PARAMS if clark else KRAJEWSKI_PARAMS
    point = rec.law().predict(x["N"], x["E"]) if clark else rec.law().predict(x["N"], x["D"], x["G"])
    s = samples(rec, [k for k in names if p.get(k) is not None])
    draws = None
    if s:
        arr = {k: s.get(k, np.zeros((next(iter(s.values())).shape[0], 1))) for k in names}
        lw = law_from_params(st.get("law", "krajewski"), arr)
        draws = lw.predict(x["N"], x["E"]) if clark else lw.predict(x["N"], x["D"], x["G"])
    with np.errstate(all="ignore"):
        return np.asarray(point, dtype=float) * np.ones(len(df)), None if draws is None else np.asarray(draws, float)


def read(rec, data, columns):
    """DATA as fit_moe reads it (scaling.data.moe_inputs)."""
    return load_moe(data, parse_columns(columns, ROLES))


def check(rec, ds) -> None:
    """Krajewski's law needs the runs' shapes to identify G (scaling.data.moe_inputs.check_shapes)."""
    if not _clark(rec):
        check_shapes(ds)
