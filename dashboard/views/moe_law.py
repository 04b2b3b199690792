"""The MoE view's scaling half: loss vs compute for dense and MoE runs, and a `fit moe` law.

Runs (the registry rows under --runs): final validation loss (else final training loss) against
compute, C = 6 N D with N the active non-embedding parameters (the convention `fit moe` fits in;
the law is drawn in it) or the trainer's own FLOPs count; a dense run is E = 1, G = 1. Colour by
experts, granularity or router.
A `fit moe` record (scaling.laws.moe through scaling.laws.registry.from_record): its data (the table or
runs it was fitted on, dashboard.stores.fit_data) and, Krajewski's L(N, D, G), the compute-optimal loss
L_opt(C; G) for each granularity in the data over the data's compute (dashed beyond it, up to the
record's own derived budgets), with its bootstrap band; Clark's L(N, E) (no data term), loss vs
active parameters for each expert count. Both laws also against their data (predicted vs
observed). A law that fit_checks flags is not drawn; its data are.
"""

from __future__ import annotations

import numpy as np

from dashboard.views.plotting import PALETTE, SYMBOLS, band, fig, note, percentile_band, rgba
from scaling.laws.moe import KRAJEWSKI_PARAMS, KrajewskiLaw
from scaling.laws.registry import from_record

COLOR_BY = {"experts": "experts E", "granularity": "granularity G", "router": "router"}
X_KINDS = {"6nd": "C = 6 N D (N: active non-embedding parameters)", "flops": "training FLOPs (the trainer's count)"}


def _num(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) else None


def run_points(rows: list[dict]) -> list[dict]:
    """Registry rows -> {id, E, G, top_k, router, N, D, C_6nd, flops, loss} for runs with a loss."""
    out = []
    for r in rows:
        loss = _num(r.get("final_val_loss"))
        loss = loss if loss is not None else _num(r.get("final_loss"))
        if loss is None or r.get("status") not in ("done", None):
            continue
        E = int(r.get("num_experts") or 1)
        N, D = _num(r.get("active_non_embedding_params")), _num(r.get("tokens"))
        out.append(
            {
                "id": r["id"],
                "E": E,
                "G": _num(r.get("granularity")) or 1.0,
                "top_k": r.get("top_k") if E > 1 else 1,
                "router": r.get("router") if E > 1 else "dense",
                "N": N,
                "D": D,
                "C_6nd": 6.0 * N * D if N and D else None,
                "flops": _num(r.get("flops")),
                "loss": loss,
            }
        )
    return out


def _key(p: dict, by: str) -> str:
    if int(p.get("E") or 1) <= 1 and float(p.get("G") or 1) <= 1:
        return "dense"
    if by == "granularity":
        return f"G={float(p.get('G') or 1):g}"
    if by == "router":
        return str(p.get("router") or "?")
    return f"E={int(p['E'])}" if p.get("E") else "E=?"


def _by_group(points, by):
    groups: dict[str, list[dict]] = {}
    for p in sorted(
        points,
        key=lambda p: (_key(p, by) != "dense", float(p.get("E") or 1), float(p.get("G") or 1), str(p.get("router"))),
    ):
        groups.setdefault(_key(p, by), []).append(p)
    return groups


def _scatter(points, by, x_of, text_of, y_of=lambda p: p["loss"]):
    data = []
    for gi, (name, pts) in enumerate(_by_group(points, by).items()):
        pts = [p for p in pts if x_of(p) is not None]
        if pts:
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": name,
                    "x": [x_of(p) for p in pts],
                    "y": [y_of(p) for p in pts],
                    "text": [text_of(p) for p in pts],
                    "marker": {
                        "color": "#111" if name == "dense" else PALETTE[gi % len(PALETTE)],
                        "symbol": SYMBOLS[gi % len(SYMBOLS)],
                        "size": 9,
                    },
                }
            )
    return data


def _text(p):
    return (
        f"{p.get('id') or p.get('run') or ''} · E={int(p.get('E') or 1)} "
        f"G={float(p.get('G') or 1):g} top-{p.get('top_k') or '?'}"
    )


def runs_figure(points: list[dict], by: str = "experts", x: str = "6nd") -> dict:
    key = "C_6nd" if x == "6nd" else "flops"
    data = _scatter(points, by, lambda p: p.get(key), _text)
    n_moe = sum(1 for p in points if _key(p, by) != "dense")
    return fig(
        "moe_loss_vs_compute",
        f"Runs: loss vs compute, {len(points) - n_moe} dense and {n_moe} MoE (colour: {COLOR_BY[by]})",
        data,
        X_KINDS[x],
        "final val loss (else train loss)",
    )


def law_figures(rec: dict, points: list[dict], draw_fit: bool, by: str = "experts", ci: float = 0.95) -> list[dict]:

    law = from_record(rec)
    clark = (rec.get("settings") or {}).get("law") == "clark"
    points = [dict(p) for p in points]  # the store's cached rows stay as read
    for p in points:
        p["C_6nd"] = 6.0 * p["N"] * p["D"] if p.get("N") and p.get("D") else None
    figs = [_clark(rec, law, points, draw_fit, by) if clark else _krajewski(rec, law, points, draw_fit, by, ci)]
    if draw_fit and points:
        pred = [
            float(law.predict(p["N"], p.get("E") or 1) if clark else law.predict(p["N"], p["D"], p.get("G") or 1.0))
            for p in points
        ]
        for p, y in zip(points, pred):
            p["_pred"] = y
        data = _scatter(points, by, lambda p: p["loss"], _text, y_of=lambda p: p["_pred"])
        lo, hi = min(p["loss"] for p in points), max(p["loss"] for p in points)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": [lo, hi],
                "y": [lo, hi],
                "name": "y = x",
                "line": {"dash": "dot", "color": "#999"},
            }
        )
        figs.append(
            fig(
                "moe_parity",
                "The law against its data: predicted vs observed loss",
                data,
                "observed loss",
                "predicted loss",
                logx=False,
            )
        )
    return figs


def _krajewski(rec, law, points, draw_fit, by, ci):
    data = _scatter(points, by, lambda p: p.get("C_6nd"), _text)
    lo, hi = (rec.get("data_range") or {}).get("C") or [None, None]
    if draw_fit and lo and hi:
        derived = [r for r in rec.get("derived") or [] if r.get("C")]
        top = max([hi] + [r["C"] for r in derived])
        cs = np.unique(np.append(np.geomspace(lo, top, 80), hi))  # the solid part ends exactly at the data's end
        Gs = sorted({float(p.get("G") or 1.0) for p in points}) or sorted(
            float(g) for g in (rec.get("design") or {}).get("G") or [1.0]
        )
        draws = _draws(rec)
        for gi, G in enumerate(Gs[:10]):
            col = (
                "#111" if G == 1 else PALETTE[gi % len(PALETTE)]
            )  # as the points coloured by granularity (dense: black)
            y = np.asarray(law.optimal_loss(cs, G), float)
            inside = cs <= hi * (1 + 1e-9)
            if draws is not None:
                b = percentile_band(draws.optimal_loss(cs[None, :], G), ci)
                if b is not None:
                    data.insert(
                        0, band(cs, b[0], b[1], f"{ci:.0%} interval (bootstrap)", _fill(col), showlegend=gi == 0)
                    )
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": cs[inside].tolist(),
                    "y": y[inside].tolist(),
                    "name": f"law L_opt(C), G={G:g}",
                    "line": {"color": col},
                }
            )
            if (~inside).any():
                k = int(inside.sum()) - 1
                data.append(
                    {
                        "type": "scatter",
                        "mode": "lines",
                        "x": cs[k:].tolist(),
                        "y": y[k:].tolist(),
                        "name": "extrapolation",
                        "line": {"color": col, "dash": "dash"},
                        "showlegend": gi == 0,
                    }
                )
        if derived:
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "x": [r["C"] for r in derived],
                    "y": [r.get("loss_opt") for r in derived],
                    "name": "derived optimum (record: best G)",
                    "marker": {"symbol": "star", "size": 12, "color": PALETTE[3]},
                    "text": [f"G={r.get('G')}: N {r.get('N_opt', 0):.3g}, D {r.get('D_opt', 0):.3g}" for r in derived],
                }
            )
    title = "Krajewski law: data and the compute-optimal loss L_opt(C) per G"
    return note(
        fig("moe_law", title, data, X_KINDS["6nd"], "loss"),
        "lines: the law's best loss at each compute for each G in the "
        "data; dashed: extrapolation; stars: the record's derived optima",
    )


def _clark(rec, law, points, draw_fit, by):
    data = _scatter(points, by, lambda p: p.get("N"), _text)
    Nr = (rec.get("data_range") or {}).get("N")
    if draw_fit and Nr:
        ns = np.geomspace(Nr[0], Nr[1], 60)
        Es = sorted({int(p.get("E") or 1) for p in points}) or [
            int(e) for e in (rec.get("design") or {}).get("E") or [1]
        ]
        for gi, E in enumerate(Es[:10]):
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": ns.tolist(),
                    "y": np.asarray(law.predict(ns, E), float).tolist(),
                    "name": f"law E={E}",
                    "line": {"color": PALETTE[gi % len(PALETTE)], "dash": "solid"},
                }
            )
    title = "Clark law: loss vs active parameters per expert count"
    return note(
        fig("moe_law", title, data, "N (active non-embedding parameters)", "loss", logy=True),
        "no data term: every run on the same tokens",
    )


def _draws(rec):

    s = (rec.get("bootstrap") or {}).get("samples") or {}
    if not s or not all(k in s for k in ("c", "a", "alpha", "b", "beta")):
        return None
    k = min(len(v) for v in s.values())
    cols = {
        p: np.asarray([np.nan if v is None else v for v in s[p][:k]], float)[:, None] if p in s else np.zeros((k, 1))
        for p in KRAJEWSKI_PARAMS
    }
    return KrajewskiLaw(**cols)


def _fill(hex_color: str) -> str:

    return rgba(hex_color, 0.12)
