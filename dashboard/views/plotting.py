"""Plotly figure pieces shared by the server-built views (plain dicts; the browser only draws).

A figure is {id, title, data, layout}. Bands are closed polygons (`fill: toself`), a law beyond
its data is a dashed trace named "extrapolation", and a y range flat to rounding gets a range of
its own (`readable_y`) so a log axis never shows ticks like 0.00300000000000744.
"""

from __future__ import annotations

import math

import numpy as np

from scaling.core.bootstrap import interval

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
EXTRAPOLATE = 100.0  # a fitted law is drawn up to this factor beyond the largest fitted compute (dashed)
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "x", "star", "triangle-down", "pentagon", "hexagon"]


def fig(fid, title, data, xt, yt, logx=True, logy=False) -> dict:
    return {
        "id": fid,
        "title": title,
        "data": data,
        "layout": {
            "title": {"text": title},
            "xaxis": {"title": {"text": xt}, "type": "log" if logx else "linear"},
            "yaxis": {"title": {"text": yt}, "type": "log" if logy else "linear"},
            "margin": {"t": 40, "r": 10},
            "legend": {"font": {"size": 10}},
        },
    }


def note(f: dict, text: str) -> dict:
    """A small caption above the plot area (what the marks mean), kept out of the title so titles stay short."""
    f["layout"].setdefault("annotations", []).append(
        {
            "text": text,
            "xref": "paper",
            "yref": "paper",
            "x": 0,
            "y": 1.0,
            "yanchor": "bottom",
            "showarrow": False,
            "font": {"size": 10, "color": "#666"},
        }
    )
    f["layout"]["margin"]["t"] = 60
    return f


def group(values, rel_tol=0.15) -> list[list[int]]:
    """Indices grouped by value: within rel_tol (in log space) of the group's first value."""
    order = np.argsort(values)
    groups, cur, ref = [], [], None
    for i in order:
        v = values[i]
        if ref is None or abs(math.log(v / ref)) > math.log1p(rel_tol):
            if cur:
                groups.append(cur)
            cur, ref = [], v
        cur.append(int(i))
    if cur:
        groups.append(cur)
    return groups


def arr(points, key) -> np.ndarray:
    return np.array([float(p[key]) if p.get(key) is not None else np.nan for p in points])


def band(x, lo, hi, name, color="rgba(31,119,180,0.15)", **kw) -> dict:
    """A shaded interval between lo(x) and hi(x)."""
    x, lo, hi = (np.asarray(v, float) for v in (x, lo, hi))
    return {
        "type": "scatter",
        "mode": "lines",
        "x": x.tolist() + x[::-1].tolist(),
        "y": hi.tolist() + lo[::-1].tolist(),
        "fill": "toself",
        "fillcolor": color,
        "line": {"width": 0},
        "name": name,
        "hoverinfo": "skip",
        **kw,
    }


def rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    if len(h) == 3:
        h = "".join(c * 2 for c in h)
    return f"rgba({int(h[0:2], 16)},{int(h[2:4], 16)},{int(h[4:6], 16)},{alpha})"


def line_split(x, y, hi, name, color, **kw) -> list[dict]:
    """A law over x: solid up to `hi` (the data's end), dashed "extrapolation" beyond it."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    inside = x <= hi * (1 + 1e-9)
    out = [
        {
            "type": "scatter",
            "mode": "lines",
            "x": x[inside].tolist(),
            "y": y[inside].tolist(),
            "name": name,
            "line": {"color": color},
            **kw,
        }
    ]
    if (~inside).any():
        k = max(int(inside.sum()) - 1, 0)  # start the dashed part where the solid one ends
        out.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": x[k:].tolist(),
                "y": y[k:].tolist(),
                "name": "extrapolation",
                "line": {"color": color, "dash": "dash"},
                **{k2: v for k2, v in kw.items() if k2 != "showlegend"},
            }
        )
    return out


def readable_y(f: dict) -> None:
    """A y range narrower than 1e-6 relative (a law flat to rounding) would get ticks like
    0.00300000000000744 and a staircase of float steps: give such an axis a range of its own."""
    ys = np.array(
        [v for t in f["data"] for v in (t.get("y") or []) if isinstance(v, (int, float)) and math.isfinite(v)], float
    )
    if ys.size == 0:
        return
    lo, hi = float(ys.min()), float(ys.max())
    ax = f["layout"].setdefault("yaxis", {})
    if ax.get("type") == "log":
        if lo > 0 and hi / lo < 1 + 1e-6:
            ax["range"] = [math.log10(lo) - 0.5, math.log10(hi) + 0.5]
    elif hi - lo <= 1e-6 * max(abs(hi), abs(lo)) and hi != 0:
        ax["range"] = [lo - 0.1 * abs(lo), hi + 0.1 * abs(hi)]


def percentile_band(draws: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Pointwise [lo, hi] over the rows of `draws` (one row per bootstrap law), None with < 5 finite rows."""
    d = np.asarray(draws, float)
    ok = np.all(np.isfinite(d), axis=1)
    if ok.sum() < 5:
        return None
    return interval(d[ok], ci, axis=0)


def error_y(values, intervals) -> dict | None:
    """Asymmetric error bars from [lo, hi] intervals (None where any is missing)."""
    if not intervals or any(iv is None for iv in intervals):
        return None
    return {
        "type": "data",
        "symmetric": False,
        "array": [iv[1] - v for v, iv in zip(values, intervals)],
        "arrayminus": [v - iv[0] for v, iv in zip(values, intervals)],
    }
