"""Paired-seed statistics for the router study (benchmarks/moe_routers.py `--paired`).

Every arm at a seed shares that seed's initialisation (MoE arms of one shape build identical
parameters: every router has one (E, d_model) weight) and data order (`train.seed`), so arms are
compared through same-seed differences, whose spread is much smaller than that of the losses.

- `paired_difference(arm, base)`: mean of arm - base over the seeds both have, its sample sd, a
  Student-t 95% interval and the mean as a percentage of the baseline's mean loss.
- `min_detectable_difference(sd, n)`: the smallest true paired difference a two-sided paired t
  test at alpha 0.05 finds with 80% power, (t_{1-alpha/2, n-1} + t_{power, n-1}) sd / sqrt(n)
  (the noncentral-t answer is within a few percent for n >= 6); stated before the results.
- `compute_multiplier(arm_curve, base_curve)`: the baseline compute that buys the arm's loss, over
  the arm's compute. Arm better: the baseline's FLOPs over the FLOPs at which the arm's curve
  reaches the baseline's final loss (>= 1); arm worse: the FLOPs at which the baseline's curve
  reaches the arm's final loss over the arm's FLOPs (<= 1); None when a curve never gets there.
  Curves are (flops, val_loss) at each evaluation, flops realised where the run recorded them.
- `bootstrap_multiplier(pairs)`: the geometric mean of the per-seed multipliers with a
  percentile bootstrap interval over seeds (resampled with replacement, fixed generator).
- `equal_compute(arms, tol)`: each arm's mean realised training FLOPs against the baseline's.

Torch-free; scipy only for t quantiles.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from scipy import stats as sps


def read_curve(run_dir: Path) -> tuple[dict, list[tuple[float, float]]]:
    """(summary, [(flops, val_loss)]) of a run; flops are `flops_realised` where recorded (MoE runs
    since the router study), else the config count `flops`. Which was read is in summary['flops_kind']."""
    run_dir = Path(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    curve: dict[int, tuple[float, float]] = {}
    realised = True
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "val_loss" not in rec:
            continue
        f = rec.get("flops_realised")
        if f is None:
            realised, f = False, rec["flops"]
        curve[rec["step"]] = (float(f), float(rec["val_loss"]))
    summary["flops_kind"] = "realised" if realised and summary.get("flops_realised") else "config"
    return summary, [curve[s] for s in sorted(curve)]


def t_interval(values: list[float], level: float = 0.95) -> dict:
    n = len(values)
    mean = sum(values) / n if n else None
    if n < 2:
        return {"n": n, "mean": mean, "sd": None, "lo": None, "hi": None}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = sps.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "sd": sd, "lo": mean - half, "hi": mean + half}


def paired_difference(arm: dict[int, float], base: dict[int, float], level: float = 0.95) -> dict:
    """arm - base over the seeds both have ({seed: final val loss} each)."""
    seeds = sorted(set(arm) & set(base))
    d = t_interval([arm[s] - base[s] for s in seeds], level)
    base_mean = sum(base[s] for s in seeds) / len(seeds) if seeds else None
    d["seeds"] = seeds
    d["percent"] = 100 * d["mean"] / base_mean if seeds and base_mean else None
    d["excludes_zero"] = d["lo"] is not None and (d["lo"] > 0 or d["hi"] < 0)
    return d


def min_detectable_difference(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true mean paired difference detected with `power` by a two-sided paired t test."""
    if n < 2:
        return math.inf
    return (sps.t.ppf(1 - alpha / 2, n - 1) + sps.t.ppf(power, n - 1)) * sd / math.sqrt(n)


def flops_to_reach(curve: list[tuple[float, float]], target: float) -> float | None:
    """FLOPs at which the curve first gets to `target` or below, linear between evaluations."""
    prev = None
    for f, loss in curve:
        if loss <= target:
            if prev is None or prev[1] == loss:
                return f
            f0, l0 = prev
            return f0 + (f - f0) * (l0 - target) / (l0 - loss)
        prev = (f, loss)
    return None


def compute_multiplier(arm: list[tuple[float, float]], base: list[tuple[float, float]]) -> float | None:
    """Baseline FLOPs that buy the arm's final loss, over the arm's FLOPs (> 1: the arm is better)."""
    (fa, la), (fb, lb) = arm[-1], base[-1]
    if la <= lb:
        reach = flops_to_reach(arm, lb)
        return fb / reach if reach else None
    reach = flops_to_reach(base, la)
    return reach / fa if reach is not None else None


def bootstrap_multiplier(multipliers: list[float], samples: int = 2000, level: float = 0.95, seed: int = 0) -> dict:
    """Geometric mean of per-seed multipliers and its percentile bootstrap interval over seeds."""
    logs = [math.log(m) for m in multipliers if m is not None and m > 0]
    if not logs:
        return {"n": 0, "mean": None, "lo": None, "hi": None}
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(logs) for _ in logs) / len(logs) for _ in range(samples))
    lo, hi = means[int((1 - level) / 2 * samples)], means[min(samples - 1, int((1 + level) / 2 * samples))]
    return {"n": len(logs), "mean": math.exp(sum(logs) / len(logs)), "lo": math.exp(lo), "hi": math.exp(hi)}


def equal_compute(flops: dict[str, float], base: str, tol: float = 0.02) -> dict[str, dict]:
    """{arm: {ratio, ok}}: each arm's mean realised training FLOPs over the baseline's, within ±tol."""
    ref = flops[base]
    return {a: {"ratio": f / ref, "ok": abs(f / ref - 1) <= tol} for a, f in flops.items()}
