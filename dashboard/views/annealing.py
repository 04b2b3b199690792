"""A `fit lr-annealing` record in the Scaling view: each run's loss curve against the law's.

The law L(s) = L0 + A S1^-alpha - C S2 (Tissue et al. 2024) predicts a whole curve from its lr
schedule; scaling.laws.lr_annealing.predict_curve gives it, with the pointwise bootstrap band of
the record's samples. The data are the curves the fitter read (dashboard.stores.fit_data), each point
at the middle of the updates it averages; points before --skip-fraction were not fitted (faint),
and a held-out run (--holdout last-run) is named so. Without the data, the record's own per-run
rows still show the last point observed against the law.
"""

from __future__ import annotations

import numpy as np

from dashboard.views.plotting import PALETTE, band, fig, note, rgba
from scaling.laws.lr_annealing import predict_curve

MAX_CURVE_POINTS = 400  # the law's curve is sent at most this many steps per run


def _thin(n: int) -> np.ndarray:
    """Indices 0..n-1, at most MAX_CURVE_POINTS of them, spaced evenly in log (early curvature kept), last included."""
    if n <= MAX_CURVE_POINTS:
        return np.arange(n)
    return np.unique(np.concatenate([np.geomspace(1, n, MAX_CURVE_POINTS).astype(int) - 1, [n - 1]]))


def figures(rec: dict, curves: list[dict], draw_fit: bool = True, ci: float = 0.95) -> list[dict]:
    """The record's figures: the curves against the law (with the data the fitter read), and the last
    points (from the record alone)."""
    st = rec.get("settings") or {}
    skip = float(st.get("skip_fraction") or 0.0)
    held = (
        {q.get("run") for q in ((rec.get("holdout") or {}).get("final_points") or [])}
        if st.get("holdout") == "last-run"
        else set()
    )
    figs = []
    if curves:
        figs += _curve_figures(rec, curves, held, skip, draw_fit, ci)
    rows = rec.get("curves") or []
    if rows:
        figs.append(_last_points(rec, rows, held, draw_fit))
    return figs


def _curve_figures(rec: dict, curves: list[dict], held: set, skip: float, draw_fit: bool, ci: float) -> list[dict]:
    """Each run's loss curve (faint before --skip-fraction) with the law's curve and band from its schedule,
    and the schedules themselves."""
    data, lrs = [], []
    for i, c in enumerate(curves):
        col = PALETTE[i % len(PALETTE)]
        name = c["run"] + (" (held out)" if c["run"] in held else "")
        lo, hi, loss = (np.asarray(c[k], float) for k in ("lo", "hi", "loss"))
        x = (lo + hi) / 2
        fitted = hi >= skip * len(c["lr"])
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": x.tolist(),
                "y": loss.tolist(),
                "name": name,
                "legendgroup": c["run"],
                "marker": {"color": [rgba(col, 0.55) if f else rgba(col, 0.2) for f in fitted], "size": 4},
            }
        )
        if draw_fit:
            pred = predict_curve(rec, c["lr"], ci=ci)
            start = (
                max(int(lo.min()) - 1, 0) if lo.size else 0
            )  # from the first observation: the law diverges as S1 -> 0
            k = start + _thin(len(pred.loss) - start)
            s = pred.steps[k]
            if pred.lo is not None:
                data.insert(
                    0,
                    band(
                        s,
                        pred.lo[k],
                        pred.hi[k],
                        f"{c['run']}: {ci:.0%} interval",
                        rgba(col, 0.15),
                        legendgroup=c["run"],
                        showlegend=False,
                    ),
                )
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": s.tolist(),
                    "y": pred.loss[k].tolist(),
                    "name": f"law: {name}",
                    "legendgroup": c["run"],
                    "line": {"color": col, "width": 2.5, "dash": "dash" if c["run"] in held else "solid"},
                    "showlegend": False,
                }
            )
        k = _thin(len(c["lr"]))
        lrs.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": (k + 1).tolist(),
                "y": np.asarray(c["lr"], float)[k].tolist(),
                "name": name,
                "line": {"color": col},
            }
        )
    title = "Loss vs step: data and the law from each run's schedule"
    f = fig("annealing_curves", title, data, "step (optimizer updates)", "loss", logx=False)
    fitted_losses = [v for c in curves for h, v in zip(c["hi"], c["loss"]) if h >= skip * len(c["lr"])]
    if fitted_losses:  # the fitted part of the curves, where schedules differ; the early drop is a zoom-out away
        lo_y, hi_y = min(fitted_losses), max(fitted_losses)
        f["layout"]["yaxis"]["range"] = [lo_y - 0.05 * (hi_y - lo_y), hi_y + 0.05 * (hi_y - lo_y)]
    note(f, f"points: data (faint: before --skip-fraction {skip:g}, not fitted); lines: the law, {ci:.0%} band")
    return [
        f,
        fig(
            "annealing_lr",
            "Learning-rate schedule per run (what the law reads)",
            lrs,
            "step (optimizer updates)",
            "lr",
            logx=False,
        ),
    ]


def _last_points(rec: dict, rows: list[dict], held: set, draw_fit: bool) -> dict:
    """The record's own per-run rows: the last point observed against the law's (and the held-out run's)."""
    names = [r["run"] + (" (held out)" if r["run"] in held else "") for r in rows]
    data = [
        {
            "type": "scatter",
            "mode": "markers",
            "x": names,
            "y": [r.get("last_point_loss") for r in rows],
            "name": "observed (last point)",
            "marker": {"size": 10, "color": PALETTE[0]},
        }
    ]
    if draw_fit:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": names,
                "y": [r.get("last_point_predicted") for r in rows],
                "name": "law",
                "marker": {"size": 12, "symbol": "x", "color": PALETTE[1]},
            }
        )
    ho = (rec.get("holdout") or {}).get("final_points") or []
    if ho and draw_fit:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": [q["run"] + " (held out)" for q in ho],
                "y": [q.get("observed") for q in ho],
                "name": "held out: observed",
                "marker": {"size": 10, "color": PALETTE[2]},
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": [q["run"] + " (held out)" for q in ho],
                "y": [q.get("predicted") for q in ho],
                "name": "held out: law",
                "marker": {"size": 12, "symbol": "x", "color": PALETTE[3]},
            }
        )
    f = fig("annealing_last", "Last point of each curve: observed vs the law", data, "run", "loss", logx=False)
    f["layout"]["xaxis"]["type"] = "category"
    return f
