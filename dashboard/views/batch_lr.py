"""A `fit batch-lr` record in the Scaling view: the optimal learning rate and batch as the law fitted them.

The compute form (DeepSeek: lr, B ~ C^x) is drawn against compute from the smallest budget to EXTRAPOLATE x the
largest (dashed beyond it); the N, D form (Step Law) as fitted against observed optima per group; the sweep's
points as loss against lr per budget, each budget's optimum starred.
"""

from __future__ import annotations

import math

import numpy as np

from dashboard.views.plotting import EXTRAPOLATE, PALETTE, arr, fig, group
from scaling.laws.hparams import ComputeHParamLaw, NDHParamLaw


def figures(rec, points, draw_fit=True) -> list[dict]:
    """The record's figures: the optimal lr and batch against compute (the compute form), loss against the lr
    per budget (with the sweep's points), the N, D form's fitted against observed optima."""
    p = rec["params"]
    groups = (rec.get("diagnostics") or {}).get("groups") or []
    form = (rec.get("settings") or {}).get("form", "compute")
    figs = []
    if form == "compute" and groups and draw_fit:
        figs += _hparams_vs_compute(p, groups)
    if points and any(pt.get("lr") for pt in points):
        figs.append(_loss_vs_lr(rec, points, groups))
    if form == "nd" and groups and draw_fit:
        figs += _nd_fitted_vs_observed(p, groups)
    return figs


def _hparams_vs_compute(p, groups) -> list[dict]:
    """The optimal lr and batch against compute: each budget's optimum, the fitted power law in C (dashed
    beyond the largest budget)."""
    figs = []
    lo, hi = min(g["C"] for g in groups), max(g["C"] for g in groups)
    cs = np.geomspace(lo, hi * EXTRAPOLATE, 60)
    fitted = dict(
        zip(
            ("opt_lr", "opt_batch_tokens"),
            ComputeHParamLaw(**{k: p[k] for k in ("lr_coef", "lr_exp_C", "bs_coef", "bs_exp_C")}).predict(C=cs),
        )
    )
    for key, coef, exp, yt in (
        ("opt_lr", "lr_coef", "lr_exp_C", "optimal lr"),
        ("opt_batch_tokens", "bs_coef", "bs_exp_C", "optimal batch (tokens)"),
    ):
        y = fitted[key]
        inside = cs <= hi * (1 + 1e-9)
        data = [
            {
                "type": "scatter",
                "mode": "markers",
                "x": [g["C"] for g in groups],
                "y": [g.get(key) for g in groups],
                "name": "per-budget optimum",
                "marker": {"size": 9},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "x": cs[inside].tolist(),
                "y": y[inside].tolist(),
                "name": f"fit {p[coef]:.3g}·C^{p[exp]:.3f}",
                "line": {"color": PALETTE[1]},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "x": cs[cs >= hi].tolist(),
                "y": y[cs >= hi].tolist(),
                "name": "extrapolation",
                "line": {"dash": "dash", "color": PALETTE[1]},
            },
        ]
        figs.append(fig(key, f"{yt} vs compute", data, "C (training FLOPs)", yt, logy=True))
    return figs


def _loss_vs_lr(rec, points, groups) -> dict:
    """Loss against the learning rate, one colour per compute budget, each budget's optimum starred."""
    C = arr(points, "flops") if all(pt.get("flops") for pt in points) else 6 * arr(points, "N") * arr(points, "D")
    lr, loss, bt = arr(points, "lr"), arr(points, "loss"), arr(points, "batch_tokens")
    data = []
    for gi, idx in enumerate(group(C, rel_tol=float((rec.get("settings") or {}).get("budget_tol") or 0.05))[:10]):
        col = PALETTE[gi % len(PALETTE)]
        cg = float(np.exp(np.mean(np.log(C[idx]))))
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": lr[idx].tolist(),
                "y": loss[idx].tolist(),
                "name": f"C≈{cg:.3g}",
                "marker": {"color": col},
                "text": [f"batch {b:.3g} tokens" for b in bt[idx]],
            }
        )
        g = min(groups, key=lambda r: abs(math.log(r["C"] / cg)), default=None)
        if g and g.get("opt_lr"):
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "x": [g["opt_lr"]],
                    "y": [g.get("opt_loss")],
                    "name": f"optimum C≈{cg:.3g}",
                    "marker": {"color": col, "symbol": "star", "size": 14},
                    "showlegend": False,
                }
            )
    return fig("loss_vs_lr", "Loss vs learning rate per compute budget (stars: optimum)", data, "learning rate", "loss")


def _nd_fitted_vs_observed(p, groups) -> list[dict]:
    """The N, D form: each group's optimal lr and batch as fitted against as observed."""
    figs = []
    law = NDHParamLaw(**{k: p.get(k) for k in ("lr_coef", "lr_exp_N", "lr_exp_D", "bs_coef", "bs_exp_D")})
    pl, pb = law.predict(N=[g["N"] for g in groups], D=[g["D"] for g in groups])
    for key, pr, yt in (("opt_lr", pl, "lr"), ("opt_batch_tokens", pb, "batch (tokens)")):
        obs = [g.get(key) for g in groups]
        data = [
            {"type": "scatter", "mode": "markers", "x": obs, "y": np.asarray(pr).tolist(), "name": "groups"},
            {
                "type": "scatter",
                "mode": "lines",
                "x": [min(obs), max(obs)],
                "y": [min(obs), max(obs)],
                "name": "y = x",
                "line": {"dash": "dot"},
            },
        ]
        figs.append(
            fig(
                key,
                f"optimal {yt}: fitted vs observed",
                data,
                f"observed optimal {yt}",
                f"predicted optimal {yt}",
                logy=True,
            )
        )
    return figs
