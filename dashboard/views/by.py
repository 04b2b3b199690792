"""A `--by` record (one law per value of a key, e.g. optim.name) in the Scaling view.

The view shows one group's law at a time (its own figures, from the points the record carries,
judged by fit_checks like any record), the `compare` block as a table, and a figure every group
shares: each law's compute-optimal loss L*(C) over compute, the groups' runs as points, and the
headline comparison (the other's loss at its largest compute, and the compute the baseline needs
for it). A group whose law is not identified is drawn as points only.
"""

from __future__ import annotations

import numpy as np

from dashboard.stores.fit_checks import not_identified
from dashboard.views import scaling as scaling_view
from dashboard.views.plotting import PALETTE, arr, fig
from scaling.core.conventions import TokenCost
from scaling.core.errors import InputError
from scaling.laws.allocation import search_range

EXTRAPOLATE = 10.0


def groups_of(rec: dict) -> list[str]:
    return list(rec.get("groups") or {})


def group_record(rec: dict, name: str) -> dict:
    """The group's own fit record (a record whose group was not fitted: its points and why)."""
    g = (rec.get("groups") or {}).get(name)
    if g is None:
        raise InputError(
            f"group {name!r} is not in this --by {rec.get('by')} fit (groups: {', '.join(groups_of(rec))})"
        )
    if g.get("record"):
        return g["record"]
    return {
        "law": rec.get("law"),
        "approach": rec.get("approach"),
        "params": {},
        "intervals": {},
        "n_points": g.get("n_points"),
        "warnings": [f"not fitted: {g.get('reason')}"],
        "objective": None,
    }


def group_flags(rec: dict, name: str) -> list[str]:
    g = (rec.get("groups") or {}).get(name) or {}
    if not g.get("fitted"):
        return [f"not fitted: {g.get('reason')}"]
    return not_identified(g["record"])


def view(rec: dict, name: str | None) -> dict:
    names = groups_of(rec)
    name = name if name not in (None, "") else names[0]
    sub, flags = group_record(rec, name), group_flags(rec, name)
    points = rec["groups"][name].get("points") or []
    figs = scaling_view.figures(sub, points, draw_fit=not flags) if sub.get("params") else []
    if rec.get("law") == "chinchilla":
        figs.insert(0, frontier_figure(rec))
    return {
        "by": rec.get("by"),
        "groups": names,
        "group": name,
        "compare": rec.get("compare"),
        "sub": sub,
        "flags": flags,
        "points": points,
        "figures": figs,
    }


def frontier_figure(rec: dict) -> dict:
    from scaling.laws.multiplier import compute_for_loss, optimal_loss  # deferred: imports scipy

    data = []
    cmp = rec.get("compare") or {}
    for i, (name, g) in enumerate((rec.get("groups") or {}).items()):
        col = PALETTE[i % len(PALETTE)]
        pts = g.get("points") or []
        if pts:
            N, D, L = arr(pts, "N"), arr(pts, "D"), arr(pts, "loss")
            C = arr(pts, "flops") if all(p.get("flops") for p in pts) else 6 * N * D
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "x": C.tolist(),
                    "y": L.tolist(),
                    "name": f"{name} runs",
                    "marker": {"color": col, "opacity": 0.6},
                    "legendgroup": name,
                }
            )
        r = g.get("record")
        if not r or group_flags(rec, name):
            continue
        cost, nr = TokenCost.from_record(r), search_range(np.asarray(r["data_range"]["N"], float))
        lo, hi = r["data_range"]["C"]
        cs = np.geomspace(lo, hi * EXTRAPOLATE, 50)
        ys = np.array([optimal_loss(r["params"], c, cost, nr) for c in cs])
        inside = cs <= hi * (1 + 1e-9)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": cs[inside].tolist(),
                "y": ys[inside].tolist(),
                "name": f"{name} L*(C)",
                "line": {"color": col},
                "legendgroup": name,
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": cs[inside.sum() - 1 :].tolist(),
                "y": ys[inside.sum() - 1 :].tolist(),
                "name": f"{name} extrapolation",
                "line": {"color": col, "dash": "dash"},
                "legendgroup": name,
                "showlegend": False,
            }
        )
        o = (cmp.get("others") or {}).get(name) or {}
        base = (rec.get("groups") or {}).get(cmp.get("baseline")) or {}
        if o.get("compute_multiplier") and base.get("record"):
            br = base["record"]
            cb = compute_for_loss(
                br["params"],
                o["loss"],
                TokenCost.from_record(br),
                search_range(np.asarray(br["data_range"]["N"], float)),
                o["compute"],
            )
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers+text",
                    "x": [o["compute"], cb],
                    "y": [o["loss"], o["loss"]],
                    "text": ["", f"×{o['compute_multiplier']:.3g}"],
                    "textposition": "top center",
                    "name": f"{cmp['baseline']} needs ×{o['compute_multiplier']:.3g}",
                    "line": {"color": col, "dash": "dot"},
                    "marker": {"symbol": "diamond", "size": 9},
                    "legendgroup": name,
                }
            )
    title = (
        f"Compute-optimal loss per {rec.get('by')} (dashed: "
        "extrapolation; dotted: the compute multiplier at matched loss)"
    )
    return fig("by_frontier", title, data, "C (training FLOPs)", "loss", logy=True)
