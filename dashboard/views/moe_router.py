"""metrics.jsonl records of an MoE run -> router-health figures (Plotly dicts).

Keys read: moe/layer{i}/load/expert{j} (fraction of routed tokens), moe/layer{i}/{imbalance,
imbalance_micro,dropped_frac,entropy,aux_loss,load_entropy,dead_experts,active_experts} and the
run-level moe/* means, moe/k_frac/k{j} (the realised k distribution) and moe/routing_change
(probe tokens whose experts changed since the previous evaluation). Per-layer load becomes one
heatmap (expert x step) per layer, so a collapsing router is visible at a glance.
"""

from __future__ import annotations

import re

_LOAD = re.compile(r"^moe/layer(\d+)/load/expert(\d+)$")
_LAYER = re.compile(r"^moe/layer(\d+)/([a-z_]+)$")
_KFRAC = re.compile(r"^moe/k_frac/k(\d+)$")
TITLES = {
    "imbalance": "Load imbalance (max/mean expert load over the step)",
    "imbalance_micro": "Load imbalance within a micro-batch (max/mean, averaged)",
    "dropped_frac": "Dropped tokens (fraction, over capacity)",
    "entropy": "Router entropy",
    "aux_loss": "Load-balancing aux loss",
    "load_entropy": "Load entropy / ln E (1 = balanced)",
    "dead_experts": "Dead experts (load share < 1/(4E))",
    "active_experts": "Realised experts per token",
}
SERIES = tuple(TITLES)


def figures(records: list[dict]) -> list[dict]:
    steps, loads, layer_series, kfrac, change = [], {}, {}, {}, []
    for t, rec in enumerate(r for r in records if any(k.startswith("moe/") for k in r)):
        steps.append(rec.get("step", t))
        if rec.get("moe/routing_change") is not None:
            change.append((steps[-1], rec["moe/routing_change"]))
        for k, v in rec.items():
            m = _LOAD.match(k)
            if m:
                loads.setdefault(int(m[1]), {}).setdefault(int(m[2]), {})[len(steps) - 1] = v
                continue
            m = _KFRAC.match(k)
            if m:
                kfrac.setdefault(int(m[1]), {})[len(steps) - 1] = v
                continue
            m = _LAYER.match(k)
            if m and m[2] in SERIES:
                layer_series.setdefault(m[2], {}).setdefault(int(m[1]), {})[len(steps) - 1] = v
    figs = []
    for layer in sorted(loads):
        experts = sorted(loads[layer])
        z = [[loads[layer][e].get(i) for i in range(len(steps))] for e in experts]
        figs.append(
            {
                "id": f"load_layer{layer}",
                "title": f"layer {layer}: expert load over time",
                "data": [
                    {
                        "type": "heatmap",
                        "x": steps,
                        "y": [f"expert {e}" for e in experts],
                        "z": z,
                        "colorscale": "Viridis",
                        "colorbar": {"title": {"text": "token share"}},
                        "zmin": 0,
                    }
                ],
                "layout": {
                    "title": {"text": f"Layer {layer}: expert load (share of routed tokens)"},
                    "xaxis": {"title": {"text": "step"}},
                    "margin": {"t": 40, "r": 10},
                    "height": 120 + 22 * len(experts),
                },
            }
        )
    for name in SERIES:
        per_layer = layer_series.get(name) or {}
        if not per_layer:
            continue
        data = [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "x": [steps[i] for i in sorted(v)],
                "y": [v[i] for i in sorted(v)],
                "name": f"layer {layer}",
            }
            for layer, v in sorted(per_layer.items())
        ]
        figs.append(
            {
                "id": name,
                "title": name,
                "data": data,
                "layout": {
                    "title": {"text": TITLES[name]},
                    "xaxis": {"title": {"text": "step"}},
                    "margin": {"t": 40, "r": 10},
                },
            }
        )
    if kfrac:
        figs.append(
            {
                "id": "k_distribution",
                "title": "k distribution",
                "data": [
                    {
                        "type": "scatter",
                        "mode": "lines",
                        "stackgroup": "k",
                        "name": f"{j} experts",
                        "x": [steps[i] for i in sorted(v)],
                        "y": [v[i] for i in sorted(v)],
                    }
                    for j, v in sorted(kfrac.items())
                    if any(v.values())
                ],
                "layout": {
                    "title": {"text": "Experts per token: share of token-layer pairs running k experts"},
                    "xaxis": {"title": {"text": "step"}},
                    "yaxis": {"range": [0, 1]},
                    "margin": {"t": 40, "r": 10},
                },
            }
        )
    if change:
        figs.append(
            {
                "id": "routing_change",
                "title": "routing change",
                "data": [
                    {
                        "type": "scatter",
                        "mode": "lines+markers",
                        "x": [c[0] for c in change],
                        "y": [c[1] for c in change],
                    }
                ],
                "layout": {
                    "title": {
                        "text": "Routing change: probe tokens whose experts changed since the previous evaluation"
                    },
                    "xaxis": {"title": {"text": "step"}},
                    "yaxis": {"range": [0, 1]},
                    "margin": {"t": 40, "r": 10},
                },
            }
        )
    return figs


RUN_LEVEL = (
    ("moe/imbalance", "Load imbalance, mean over layers"),
    ("moe/dropped_frac", "Dropped tokens, mean over layers"),
    ("moe/active_experts", "Realised experts per token, mean over layers"),
    ("moe/load_entropy", "Load entropy / ln E, mean over layers"),
    ("moe/routing_change", "Routing change between evaluations"),
)


def compare(runs: list[tuple[dict, list[dict]]]) -> list[dict]:
    """Router comparison across MoE runs: run-level moe/* means vs step, one trace per run (router in the name)."""
    figs = []
    for key, title in RUN_LEVEL:
        data = []
        for row, recs in runs:
            pts = [(r.get("step"), r[key]) for r in recs if r.get(key) is not None]
            if pts:
                data.append(
                    {
                        "type": "scatter",
                        "mode": "lines",
                        "name": f"{row['id']} ({row.get('router') or '?'})",
                        "x": [p[0] for p in pts],
                        "y": [p[1] for p in pts],
                    }
                )
        if data:
            figs.append(
                {
                    "id": "compare_" + key.split("/")[1],
                    "title": title,
                    "data": data,
                    "layout": {
                        "title": {"text": f"{title} — per router"},
                        "xaxis": {"title": {"text": "step"}},
                        "margin": {"t": 40, "r": 10},
                        "legend": {"font": {"size": 10}},
                    },
                }
            )
    return figs
