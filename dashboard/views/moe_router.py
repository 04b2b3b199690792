"""metrics.jsonl records of an MoE run -> router-health figures (Plotly dicts).

Keys read: moe/layer{i}/load/expert{j} (fraction of routed tokens), moe/layer{i}/{imbalance,
dropped_frac,entropy,...} and the run-level moe/* means. Per-layer load becomes one heatmap
(expert x step) per layer, so a collapsing router is visible at a glance.
"""

from __future__ import annotations

import re

_LOAD = re.compile(r"^moe/layer(\d+)/load/expert(\d+)$")
_LAYER = re.compile(r"^moe/layer(\d+)/([a-z_]+)$")
SERIES = ("imbalance", "dropped_frac", "entropy", "aux_loss")


def figures(records: list[dict]) -> list[dict]:
    steps, loads, layer_series = [], {}, {}
    for t, rec in enumerate(r for r in records if any(k.startswith("moe/") for k in r)):
        steps.append(rec.get("step", t))
        for k, v in rec.items():
            m = _LOAD.match(k)
            if m:
                loads.setdefault(int(m[1]), {}).setdefault(int(m[2]), {})[len(steps) - 1] = v
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
                    "title": {
                        "text": {
                            "imbalance": "Load imbalance (max/mean expert load)",
                            "dropped_frac": "Dropped tokens (fraction, over capacity)",
                            "entropy": "Router entropy",
                            "aux_loss": "Load-balancing aux loss",
                        }[name]
                    },
                    "xaxis": {"title": {"text": "step"}},
                    "margin": {"t": 40, "r": 10},
                },
            }
        )
    return figs


RUN_LEVEL = (
    ("moe/imbalance", "Load imbalance, mean over layers"),
    ("moe/dropped_frac", "Dropped tokens, mean over layers"),
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
