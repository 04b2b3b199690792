"""The router study's figures, read from run directories (`benchmarks/moe_routers.py` prints them,
notebooks/4_moe.ipynb and 5_loss_curves.ipynb draw them): pure Python over metrics.jsonl records.

Every figure comes from a run's `summary.json` and `metrics.jsonl` (no re-evaluation):
- compute to reach a loss: the training FLOPs (`flops` of the records carrying `val_loss`, i.e.
  models/accounting.py's FLOPs per token x tokens) at which the validation curve first reaches the
  target, linearly interpolated between the two evaluations around the crossing;
- router health over training: a metric's mean over all log records and over each quarter of the
  run (records split by step), so imbalance early in training is not hidden by the end;
- expert utilisation entropy: the entropy (nats) of each MoE layer's load over experts
  (`moe/layer{i}/load/expert{j}`, the assignment fractions before dropping), averaged over layers:
  ln E when every expert gets the same share, 0 when one expert takes everything.
"""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

from rundir.layout import RunDir
from rundir.metrics import read_metrics
from rundir.summary import read_summary

_LOAD = re.compile(r"^moe/layer(\d+)/load/expert(\d+)$")


def read_run(run_dir: Path) -> tuple[dict, list[dict]]:
    """(summary, metric records) of a finished run; a run without a readable summary.json is an error."""
    summary = read_summary(run_dir, strict=True)
    if summary is None:
        raise FileNotFoundError(f"{RunDir(run_dir).summary}: the run has not finished")
    return summary, read_metrics(RunDir(run_dir).metrics)


def val_curve(records: list[dict]) -> list[tuple[float, int, float]]:
    """(flops, tokens, val_loss) at every evaluation, in training order (last record per step wins)."""
    by_step = {
        r["step"]: (float(r["flops"]), int(r["tokens"]), float(r["val_loss"])) for r in records if "val_loss" in r
    }
    return [by_step[s] for s in sorted(by_step)]


def flops_to_reach(curve: list[tuple[float, int, float]], target: float) -> float | None:
    """FLOPs at which the curve first gets to `target` or below (linear interpolation between the
    evaluations around the crossing); None when it never does. A curve already below the target
    at its first evaluation returns that evaluation's FLOPs (an upper bound)."""
    prev = None
    for flops, _, loss in curve:
        if loss <= target:
            if prev is None or prev[1] == loss:
                return flops
            f0, l0 = prev
            return f0 + (l0 - target) / (l0 - loss) * (flops - f0)
        prev = (flops, loss)
    return None


def quarter_means(records: list[dict], key: str) -> list[float | None]:
    """Mean of `key` over the records of each quarter of training (by step)."""
    pts = [(r["step"], r[key]) for r in records if key in r and r[key] is not None and math.isfinite(r[key])]
    if not pts:
        return [None] * 4
    last = max(s for s, _ in pts)
    out = []
    for q in range(4):
        vals = [v for s, v in pts if q * last / 4 < s <= (q + 1) * last / 4 or (q == 0 and s == 0)]
        out.append(sum(vals) / len(vals) if vals else None)
    return out


def overall_mean(records: list[dict], key: str) -> float | None:
    vals = [r[key] for r in records if key in r and r[key] is not None and math.isfinite(r[key])]
    return sum(vals) / len(vals) if vals else None


def add_utilisation_entropy(records: list[dict]) -> int:
    """Write `util_entropy` (mean over MoE layers of the load's entropy, nats) into every record
    with per-expert loads; returns the number of experts (0 for a dense run)."""
    experts = 0
    for r in records:
        layers: dict[int, list[float]] = {}
        for k, v in r.items():
            m = _LOAD.match(k)
            if m:
                layers.setdefault(int(m.group(1)), []).append(float(v))
        if not layers:
            continue
        ents = []
        for loads in layers.values():
            total = sum(loads)
            ents.append(-sum(p / total * math.log(p / total) for p in loads if p > 0) if total > 0 else float("nan"))
            experts = max(experts, len(loads))
        r["util_entropy"] = sum(ents) / len(ents)
    return experts


def mean_sd(values: list[float | None]) -> dict:
    """{mean, sd, n, values}: sd is the sample standard deviation (n - 1), None for one value."""
    vals = [v for v in values if v is not None]
    return {
        "mean": statistics.fmean(vals) if vals else None,
        "sd": statistics.stdev(vals) if len(vals) > 1 else None,
        "n": len(vals),
        "values": list(values),
    }


def mean_curve(curves: list[list[tuple[float, int, float]]]) -> list[tuple[int, float]]:
    """(tokens, mean val loss) over seeds at the evaluations all curves share."""
    common = set.intersection(*({t for _, t, _ in c} for c in curves)) if curves else set()
    return [(t, statistics.fmean(loss for c in curves for _, tt, loss in c if tt == t)) for t in sorted(common)]


def per_doubling_drops(curve: list[tuple[int, float]]) -> list[dict]:
    """How much the loss fell over each doubling of tokens ending at an evaluation: L(t/2) - L(t),
    with L(t/2) interpolated linearly in log tokens. The steep early phase is where this is large."""
    out = []
    for t, loss in curve:
        half = t / 2
        lo = [(tt, ll) for tt, ll in curve if tt <= half]
        hi = [(tt, ll) for tt, ll in curve if tt >= half]
        if not lo or not hi:
            continue
        (t0, l0), (t1, l1) = lo[-1], hi[0]
        l_half = l0 if t1 == t0 else l0 + (l1 - l0) * (math.log(half) - math.log(t0)) / (math.log(t1) - math.log(t0))
        out.append({"tokens": t, "val_loss": loss, "drop_per_doubling": l_half - loss})
    return out


def trend_crossing(points: list[tuple[float, float]], target: float) -> dict:
    """Least-squares line ratio = a + b log10(N) through (N, ratio) points; where it reaches target."""
    pts = [(math.log10(n), r) for n, r in points if r is not None]
    if len(pts) < 2:
        return {"slope_per_decade": None, "n_at_target": None, "points": len(pts)}
    mx = statistics.fmean(x for x, _ in pts)
    my = statistics.fmean(y for _, y in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else 0.0
    a = my - b * mx
    n_at = 10 ** ((target - a) / b) if b else None
    return {
        "slope_per_decade": b,
        "intercept": a,
        "n_at_target": n_at,
        "points": len(pts),
        "reaches_target_with_growing_n": bool(b < 0 or a + b * max(x for x, _ in pts) <= target),
    }
