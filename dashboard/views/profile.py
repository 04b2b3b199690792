"""metrics.jsonl records of one run -> step-time breakdown and peak-memory figures (Plotly dicts).

Keys read (docs/run-directory.md, "Metric names"): `time/data_s`, `time/fwd_bwd_s`, `time/optim_s` (the phases of
a log step, stacked), `time/step_s` (the whole step: what the stack leaves is drawn as "other"),
`time/comm_s` (DeepSpeed's collectives: a line, since they happen inside fwd_bwd and optim), and
memory `mem/max_allocated_gb`, `mem/max_reserved_gb` (CUDA) or `mem/max_rss_gb` (CPU).
"""

from __future__ import annotations

PHASES = (("time/data_s", "data wait"), ("time/fwd_bwd_s", "forward+backward"), ("time/optim_s", "optimizer"))
MEMORY = (
    ("mem/max_allocated_gb", "max allocated (CUDA)"),
    ("mem/max_reserved_gb", "max reserved (CUDA)"),
    ("mem/max_rss_gb", "max resident set (CPU process)"),
)
KEYS = tuple(k for k, _ in PHASES) + ("time/step_s", "time/comm_s") + tuple(k for k, _ in MEMORY)


def _layout(title: str, y: str, **extra) -> dict:
    return {
        "title": {"text": title},
        "xaxis": {"title": {"text": "step"}},
        "yaxis": {"title": {"text": y}},
        "margin": {"t": 40, "r": 10},
        "legend": {"orientation": "h"},
        **extra,
    }


def figures(records: list[dict]) -> list[dict]:
    """[time breakdown, memory] for the records that carry them (either may be absent)."""
    timed = [r for r in records if any(k in r for k, _ in PHASES)]
    figs = []
    if timed:
        steps = [r.get("step") for r in timed]
        data = [
            {"type": "bar", "name": label, "x": steps, "y": [r.get(k) for r in timed], "meta": k} for k, label in PHASES
        ]
        other = [
            None if r.get("time/step_s") is None else max(0.0, r["time/step_s"] - sum(r.get(k) or 0 for k, _ in PHASES))
            for r in timed
        ]
        if any(v is not None for v in other):
            data.append({"type": "bar", "name": "other", "x": steps, "y": other, "meta": "other"})
        if any("time/comm_s" in r for r in timed):
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": "communication (inside the phases)",
                    "x": steps,
                    "y": [r.get("time/comm_s") for r in timed],
                    "meta": "time/comm_s",
                    "line": {"color": "black", "dash": "dot"},
                }
            )
        figs.append(
            {
                "id": "time",
                "title": "Step time breakdown",
                "data": data,
                "layout": _layout("Step time breakdown (log steps)", "seconds", barmode="stack"),
            }
        )
    mem = [(k, label) for k, label in MEMORY if any(k in r for r in records)]
    if mem:
        data = []
        for k, label in mem:
            pts = [(r.get("step"), r[k]) for r in records if r.get(k) is not None]
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": label,
                    "meta": k,
                    "x": [p[0] for p in pts],
                    "y": [p[1] for p in pts],
                }
            )
        figs.append(
            {
                "id": "memory",
                "title": "Peak memory",
                "data": data,
                "layout": _layout("Peak memory per log window (max over ranks)", "GB (10^9 bytes)"),
            }
        )
    return figs
