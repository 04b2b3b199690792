"""Fit record (+ its data points) -> Plotly figures for the Scaling view.

Server-side so the law algebra lives in Python next to `scaling.laws`; the browser only draws.
Every figure is a plain dict {id, title, data, layout}. An lr-annealing record's curves are drawn by
dashboard.views.annealing, a batch/LR record's figures by dashboard.views.batch_lr; MoE laws and the
loss-to-accuracy chain by their own modules (api_views).
Curves beyond the largest fitted compute are drawn dashed and labelled as extrapolation. With draw_fit=False
(a fit that fit_checks says is not identified) only the data are drawn: no fitted curve, band or extrapolation.
"""

from __future__ import annotations

import math

import numpy as np

from dashboard.views.annealing import figures as annealing
from dashboard.views.batch_lr import figures as batch_lr
from dashboard.views.plotting import EXTRAPOLATE, PALETTE, arr, fig, group, readable_y
from scaling.core.bootstrap import interval
from scaling.laws.hparams import PowerLaw, StepsExamplesLaw
from scaling.laws.loss import ChinchillaLaw, FrontierLaw
from scaling.laws.registry import from_record


def figures(rec: dict, points: list[dict], draw_fit: bool = True) -> list[dict]:
    law = rec.get("law")
    builder = {
        "chinchilla": _chinchilla,
        "batch-lr": batch_lr,
        "batch_lr": batch_lr,
        "critical-batch": _critical_batch,
        "critical_batch": _critical_batch,
        "kaplan": _kaplan,
        "lr-annealing": _lr_annealing,
    }.get(law)
    if builder is None:
        return []
    try:
        figs = builder(rec, points, draw_fit)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        return [{"id": "error", "title": f"cannot draw this {law} record: {exc}", "data": [], "layout": {}}]
    for f in figs:
        readable_y(f)
        if not draw_fit:
            f["title"] += " — fitted law not drawn (not identified)"
            f["layout"]["title"]["text"] = f["title"]
    return figs


def _c_range(rec, C):
    lo, hi = (rec.get("data_range") or {}).get("C") or [None, None]
    if lo is None and C.size:
        lo, hi = float(np.nanmin(C)), float(np.nanmax(C))
    return lo, hi


def _chinchilla(rec, points, draw_fit=True):
    p = rec["params"]
    N, D, L = arr(points, "N"), arr(points, "D"), arr(points, "loss")
    C = arr(points, "flops") if points and all(pt.get("flops") for pt in points) else 6 * N * D
    figs = []
    param3 = all(p.get(k) is not None for k in ("E", "A", "B", "alpha", "beta"))
    if param3:
        law = ChinchillaLaw(**{k: p[k] for k in ("E", "A", "B", "alpha", "beta")})
    else:  # approaches 1 and 2: only the frontier
        law = FrontierLaw(**{k: p[k] for k in ("N_coef", "a", "D_coef", "b")}) if draw_fit else None
    pred = law.predict if param3 and draw_fit else None
    if points:
        figs.append(_loss_vs_n(N, D, L, pred))
        figs.append(_isoflop(rec, N, L, C, pred, draw_fit))
    lo, hi = _c_range(rec, C)
    if lo and hi and draw_fit:
        figs.append(_frontier(rec, law, points, N, L, C, lo, hi, param3))
    return figs


def _loss_vs_n(N, D, L, pred) -> dict:
    """Loss vs N, one colour per (log-binned) D; the law's line at each D when it predicts loss."""
    data = []
    for gi, idx in enumerate(group(D, rel_tol=0.5)[:10]):
        col = PALETTE[gi % len(PALETTE)]
        dg = float(np.exp(np.mean(np.log(D[idx]))))
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": N[idx].tolist(),
                "y": L[idx].tolist(),
                "name": f"D≈{dg:.3g}",
                "marker": {"color": col},
                "legendgroup": str(gi),
            }
        )
        if pred:
            ns = np.geomspace(N[idx].min() / 2, N[idx].max() * 2, 60)
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": ns.tolist(),
                    "y": pred(ns, dg).tolist(),
                    "name": f"fit D≈{dg:.3g}",
                    "line": {"color": col},
                    "legendgroup": str(gi),
                    "showlegend": False,
                }
            )
    return fig("loss_vs_n", "Loss vs N per D (points: data, lines: fit)", data, "N (parameters)", "loss")


def _isoflop(rec, N, L, C, pred, draw_fit: bool) -> dict:
    """Loss vs N at fixed compute, one colour per budget: the law's curve (approach 3), else the record's
    per-budget parabola (approach 2) near that budget."""
    budgets = (rec.get("diagnostics") or {}).get("budgets") or []
    data = []
    for gi, idx in enumerate(group(C, rel_tol=float((rec.get("settings") or {}).get("budget_tol") or 0.15))[:10]):
        col = PALETTE[gi % len(PALETTE)]
        cg = float(np.exp(np.mean(np.log(C[idx]))))
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": N[idx].tolist(),
                "y": L[idx].tolist(),
                "name": f"C≈{cg:.3g}",
                "marker": {"color": col},
                "legendgroup": f"c{gi}",
            }
        )
        ns = np.geomspace(N[idx].min(), N[idx].max(), 60)
        ys = None
        if pred:
            ys = pred(ns, cg / (6 * ns))
        elif draw_fit:
            b = min(budgets, key=lambda r: abs(math.log(r["C"] / cg)), default=None)
            if b and b.get("curvature") is not None and abs(math.log(b["C"] / cg)) < 0.2:
                ys = b["loss_opt"] + b["curvature"] * (np.log(ns) - math.log(b["N_opt"])) ** 2
        if ys is not None:
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": ns.tolist(),
                    "y": np.asarray(ys).tolist(),
                    "name": f"fit C≈{cg:.3g}",
                    "line": {"color": col},
                    "legendgroup": f"c{gi}",
                    "showlegend": False,
                }
            )
    return fig("isoflop", "IsoFLOP curves: loss vs N at fixed compute", data, "N (parameters)", "loss")


def _frontier(rec, law, points, N, L, C, lo: float, hi: float, param3: bool) -> dict:
    """The compute-optimal frontier N_opt(C) from the smallest fitted compute to EXTRAPOLATE x the largest (dashed
    beyond it), its bootstrap band (approach 3), the per-budget optima and the record's derived points."""
    budgets = (rec.get("diagnostics") or {}).get("budgets") or []
    cs = np.geomspace(lo, hi * EXTRAPOLATE, 80)
    nopt = law.compute_optimal(cs)[0]  # C = 6 N D (approach 3) or the fitted frontier (approaches 1, 2)
    inside = cs <= hi * (1 + 1e-9)
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "x": cs[inside].tolist(),
            "y": nopt[inside].tolist(),
            "name": "N_opt(C) fit",
            "line": {"color": PALETTE[0]},
        },
        {
            "type": "scatter",
            "mode": "lines",
            "x": cs[~inside | (np.arange(cs.size) == inside.sum() - 1)].tolist(),
            "y": nopt[~inside | (np.arange(cs.size) == inside.sum() - 1)].tolist(),
            "name": "extrapolation",
            "line": {"color": PALETTE[0], "dash": "dash"},
        },
    ]
    band = _bootstrap_band(rec, cs) if param3 else None
    if band is not None:
        data.insert(
            0,
            {
                "type": "scatter",
                "mode": "lines",
                "x": cs.tolist() + cs[::-1].tolist(),
                "y": band[1].tolist() + band[0][::-1].tolist(),
                "fill": "toself",
                "fillcolor": "rgba(31,119,180,0.15)",
                "line": {"width": 0},
                "name": f"{int(100 * float(rec.get('bootstrap', {}).get('ci', 0.95)))}% interval (bootstrap)",
            },
        )
    data += _optima(rec, budgets, points, N, L, C, param3)
    f = fig(
        "frontier",
        "Compute-optimal frontier N_opt(C) (dashed: extrapolation)",
        data,
        "C (training FLOPs)",
        "N_opt (parameters)",
        logy=True,
    )
    f["layout"]["shapes"] = [
        {
            "type": "line",
            "x0": hi,
            "x1": hi,
            "yref": "paper",
            "y0": 0,
            "y1": 1,
            "line": {"dash": "dot", "color": "#999"},
        }
    ]
    return f


def _optima(rec, budgets, points, N, L, C, param3: bool) -> list[dict]:
    """The frontier's points: each budget's optimum from the record (else the best run per IsoFLOP group, for
    approach 3), and the record's derived optima with their intervals."""
    out: list[dict] = []
    opt = budgets or (rec.get("diagnostics") or {}).get("envelope") or []
    if opt:
        out.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": [r["C"] for r in opt],
                "y": [r["N_opt"] for r in opt],
                "name": "per-budget optimum",
                "marker": {"color": PALETTE[1], "size": 9},
            }
        )
    elif points and param3:  # best run per IsoFLOP group
        best = [min(idx, key=lambda i: L[i]) for idx in group(C)]
        out.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": C[best].tolist(),
                "y": N[best].tolist(),
                "name": "best run per budget",
                "marker": {"color": PALETTE[1], "size": 9},
            }
        )
    der = [r for r in rec.get("derived") or [] if r.get("N_opt") is not None]
    if der:
        tr = {
            "type": "scatter",
            "mode": "markers",
            "x": [r["C"] for r in der],
            "y": [r["N_opt"] for r in der],
            "name": "derived (record)",
            "marker": {"symbol": "diamond", "size": 10, "color": PALETTE[3]},
        }
        if all(r.get("N_opt_interval") for r in der):
            tr["error_y"] = {
                "type": "data",
                "symmetric": False,
                "array": [r["N_opt_interval"][1] - r["N_opt"] for r in der],
                "arrayminus": [r["N_opt"] - r["N_opt_interval"][0] for r in der],
            }
        out.append(tr)
    return out


def _bootstrap_band(rec, cs):
    s = (rec.get("bootstrap") or {}).get("samples") or {}
    try:
        al, be, A, B = (np.asarray(s[k], float) for k in ("alpha", "beta", "A", "B"))
    except (KeyError, TypeError, ValueError):
        return None
    ok = np.isfinite(al) & np.isfinite(be) & np.isfinite(A) & np.isfinite(B) & (al > 0) & (be > 0)
    if ok.sum() < 5:
        return None
    draws = ChinchillaLaw(
        E=0.0, A=A[ok][:, None], B=B[ok][:, None], alpha=al[ok][:, None], beta=be[ok][:, None]
    )  # one row per resample
    return interval(
        draws.compute_optimal(cs[None, :])[0], float((rec.get("bootstrap") or {}).get("ci") or 0.95), axis=0
    )


def _critical_batch(rec, points, draw_fit=True):
    p, models = rec["params"], rec.get("models") or []
    figs = []
    if models:
        ns = np.geomspace(min(m["N"] for m in models), max(m["N"] for m in models) * EXTRAPOLATE, 50)
        data = [
            {
                "type": "scatter",
                "mode": "markers",
                "x": [m["N"] for m in models],
                "y": [m["B_crit"] for m in models],
                "name": "per-model B_crit",
                "marker": {"size": 9},
            }
        ]
        if draw_fit:
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": ns.tolist(),
                    "y": PowerLaw(coef=p["bcrit_coef"], exp=p["bcrit_exp_N"]).predict(ns).tolist(),
                    "name": "fit B_crit(N)",
                }
            )
        figs.append(fig("bcrit", "Critical batch vs model size", data, "N (parameters)", "B_crit (tokens)", logy=True))
    if points and models:
        N, B, S = arr(points, "N"), arr(points, "batch_tokens"), arr(points, "steps")
        data = []
        for gi, m in enumerate(models[:10]):
            col = PALETTE[gi % len(PALETTE)]
            idx = np.where(np.abs(np.log(N / m["N"])) < 0.05)[0]
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "x": B[idx].tolist(),
                    "y": S[idx].tolist(),
                    "name": f"N={m['N']:.3g}",
                    "marker": {"color": col},
                }
            )
            if not draw_fit:
                continue
            bs = np.geomspace(*(m.get("B_range") or [B[idx].min(), B[idx].max()]), 50)
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": bs.tolist(),
                    "y": StepsExamplesLaw(m["S_min"], m["E_min"]).steps(bs).tolist(),
                    "line": {"color": col},
                    "showlegend": False,
                }
            )
        figs.append(
            fig(
                "steps_vs_batch",
                "Steps to target vs batch (lines: S_min(1+B_crit/B))",
                data,
                "batch (tokens)",
                "steps",
                logy=True,
            )
        )
    return figs


def _kaplan(rec, points, draw_fit=True):
    law = from_record(rec)
    if not points:
        return []
    N, D, L = arr(points, "N"), arr(points, "D"), arr(points, "loss")
    x, xt = (D, "D (tokens)") if law.form == "d" else (N, "N (parameters)")
    data = [{"type": "scatter", "mode": "markers", "x": x.tolist(), "y": L.tolist(), "name": "data"}]
    if draw_fit:
        pred = law.predict(N=N if law.form != "d" else None, D=D if law.form != "n" else None)
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": x.tolist(),
                "y": np.asarray(pred).tolist(),
                "name": "fit",
                "marker": {"symbol": "x"},
            }
        )
    return [fig("kaplan", f"Kaplan ({law.form}) fit vs data", data, xt, "loss", logy=True)]


def _lr_annealing(rec, curves, draw_fit=True):

    return annealing(rec, curves, draw_fit, float((rec.get("settings") or {}).get("ci") or 0.95))
