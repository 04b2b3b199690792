"""The Plan view: `scalelab plan` over a range of compute budgets -> cost against predicted loss.

Each budget is planned exactly as `scalelab plan FIT --compute C --device ...` plans it (the same
calls: scaling.planning.plan.make_plan, then scaling.planning.cost.cost_block on the hardware resolved once by
scaling.planning.cost.resolve_mfu, the searched layout and, with mfu auto and no finished runs on the device,
the step-time model's MFU for that budget's run: scaling.planning.budget.price_layout; nothing is re-derived
here), so a row of the table is what the CLI prints for that budget. The Pareto front keeps the planned
runs no cheaper run beats on predicted loss (planned models are designed at N_opt within 2% of it; with
presets a bigger budget can buy a run that is not better).
Inputs carry `scalelab plan`'s flag names and defaults: device (none), precision (bf16),
num-devices (1), mfu (auto), usd-per-device-hour (none), ci (0.95).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from dashboard.views.plotting import PALETTE, band, error_y, fig
from scaling.core.errors import InputError
from scaling.planning.plan import make_plan
from scaling.planning.run_model import run_label
from scaling.planning.verdict import NOT_IDENTIFIED

MAX_POINTS = 40
DEFAULT_POINTS = 13
DEFAULT_SPAN = 1000.0  # budgets from the largest fitted compute up to this factor beyond it
COST_AXES = {
    "usd": "cost (USD)",
    "device_hours": "device-hours",
    "days": "wall-clock days",
    "compute": "compute (FLOPs, the fit's convention)",
}


def budgets(rec: dict, lo: float | None, hi: float | None, n: int) -> list[float]:
    """n budgets spaced evenly in log between lo and hi (default: the fit's largest compute to 1000x it)."""
    if not 2 <= n <= MAX_POINTS:
        raise InputError(f"points must be between 2 and {MAX_POINTS} (got {n})")
    c_max = ((rec.get("data_range") or {}).get("C") or [None, None])[1]
    lo = lo if lo is not None else c_max
    hi = hi if hi is not None else (lo * DEFAULT_SPAN if lo else None)
    if not lo or not hi:
        raise InputError("the fit record states no compute range (data_range.C): give from and to (FLOPs)")
    for name, v in (("from", lo), ("to", hi)):
        if not (v > 0 and math.isfinite(v)):
            raise InputError(f"{name} must be a positive number of FLOPs (got {v})")
    if hi <= lo:
        raise InputError(f"to ({hi:g}) must be larger than from ({lo:g})")
    return [float(c) for c in np.geomspace(lo, hi, n)]


def hardware(opts, runs_root):
    """scalelab plan's pricing inputs, checked as the CLI checks them (InputError names the flag)."""
    from scaling.planning import cost as costs  # deferred: imports scipy

    opts.check()
    if not opts.device:
        return None
    precision = opts.precision or "bf16"
    mfu = costs.resolve_mfu(opts.mfu, opts.device, precision, runs_root)
    return costs.Hardware(opts.device, precision, opts.num_devices or 1, mfu, opts.usd_per_device_hour)


def plan_rows(rec, Cs: list[float], hw, ci: float, others=(), opts=None) -> tuple[list[dict], list[str], dict | None]:
    """One row per budget: the plan's verdict, run, predicted loss and cost; the plans' warnings that
    no verdict groups; the first cost block. `others`: records of other approaches on the same runs,
    compared with `rec` on the compute-optimal exponent (as `scalelab plan A3.json A2.json`). With `opts`
    (the BudgetOptions) each budget's run is laid out and, with mfu auto and no finished runs on the device,
    priced at the step-time model's MFU for it, as the CLI prices it (scaling.planning.budget.price_layout)."""
    from scaling.planning.budget import price_layout  # deferred: imports scipy
    from scaling.planning.cost import cost_block

    rows, warnings, first_cost = [], [], None
    for C in Cs:
        plan = make_plan([rec, *others], C, ci=ci)
        run = plan.get("run") or {}
        v = plan.get("verdict") or {}
        row = {
            "compute": C,
            "verdict": v.get("status"),
            "identified": v.get("status") != NOT_IDENTIFIED,
            "verdict_reasons": v.get("reasons") or [],
            "verdict_warnings": v.get("warnings") or [],
            "N_opt_lo": (plan.get("N_opt_interval") or [None, None])[0],
            "N_opt_hi": (plan.get("N_opt_interval") or [None, None])[1],
            "N_opt": plan["N_opt"],
            "D_opt": plan["D_opt"],
            "loss_at_optimum": plan.get("loss_at_optimum"),
            "preset": run.get("preset"),
            "model": run_label(run) if run else None,
            "shape_rule": run.get("shape_rule"),
            "N": run.get("N"),
            "tokens": run.get("tokens"),
            "loss": run.get("loss"),
            "loss_lo": (run.get("loss_interval") or [None, None])[0],
            "loss_hi": (run.get("loss_interval") or [None, None])[1],
        }
        if hw is not None:
            row_hw = dataclasses.replace(hw)  # the predicted MFU is this budget's run's
            if opts is not None and run:
                price_layout(plan, row_hw, opts)
            cost = cost_block(plan, row_hw, ci=ci)
            row["mfu"], row["mfu_source"] = cost.get("mfu"), cost.get("mfu_source")
            row["layout"] = (plan.get("layout") or {}).get("describe")
            first_cost = first_cost or cost
            for k in ("device_hours", "days", "usd", "tokens_per_s"):
                iv = cost.get(f"{k}_interval") or [None, None]
                row.update({k: cost.get(k), f"{k}_lo": iv[0], f"{k}_hi": iv[1]})
            row["hardware_flops"] = cost["hardware_flops"]
        rows.append(row)
        grouped = set(v.get("warnings") or [])
        warnings += [w for w in plan.get("warnings") or [] if w not in warnings and w not in grouped]
    mark_pareto(
        rows, "usd" if hw is not None and hw.usd_per_device_hour else "device_hours" if hw is not None else "compute"
    )
    return rows, warnings, first_cost


def mark_pareto(rows: list[dict], key: str) -> None:
    """row["pareto"]: no cheaper (by `key`) planned run has a lower or equal predicted loss."""
    best = math.inf
    for r in sorted(rows, key=lambda r: (r.get(key) is None, r.get(key) or 0.0)):
        ok = r.get("loss") is not None and r.get(key) is not None and r["loss"] < best
        r["pareto"] = bool(ok)
        if ok:
            best = r["loss"]


def figures(rows: list[dict], x: str, ci: float) -> list[dict]:
    """Predicted loss against cost (with intervals and the Pareto front) and cost against compute."""
    figs = []
    pct = f"{ci:.0%}"
    have = [r for r in rows if r.get(x) is not None]
    with_loss = [r for r in have if r.get("loss") is not None]
    if with_loss:
        xs, ys = [r[x] for r in with_loss], [r["loss"] for r in with_loss]
        tr = {
            "type": "scatter",
            "mode": "markers",
            "x": xs,
            "y": ys,
            "name": f"planned run, {pct} prediction interval",
            "marker": {"color": PALETTE[0], "size": 8},
            "text": [f"{r['model']} · C {r['compute']:.3g}" for r in with_loss],
            "error_y": error_y(
                ys, [[r["loss_lo"], r["loss_hi"]] if r.get("loss_lo") is not None else None for r in with_loss]
            ),
        }
        ex = (
            error_y(xs, [[r[f"{x}_lo"], r[f"{x}_hi"]] if r.get(f"{x}_lo") is not None else None for r in with_loss])
            if x != "compute"
            else None
        )
        if ex:
            tr["error_x"] = {**ex, "color": "#9ca3af"}
        front = sorted((r for r in with_loss if r["pareto"]), key=lambda r: r[x])
        opt = [r for r in have if r.get("loss_at_optimum") is not None]
        data = [
            tr,
            {
                "type": "scatter",
                "mode": "lines+markers",
                "x": [r[x] for r in front],
                "y": [r["loss"] for r in front],
                "name": "Pareto front",
                "line": {"color": PALETTE[3], "shape": "hv"},
                "marker": {"color": PALETTE[3], "symbol": "diamond-open", "size": 12},
            },
        ]
        if opt:
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": [r[x] for r in opt],
                    "y": [r["loss_at_optimum"] for r in opt],
                    "name": "continuous optimum N_opt, D_opt",
                    "line": {"color": PALETTE[2], "dash": "dot"},
                }
            )
        figs.append(
            fig(
                "plan_cost_loss",
                f"Predicted loss vs {COST_AXES[x]} (the Pareto curve of cost vs loss)",
                data,
                COST_AXES[x],
                "predicted loss",
            )
        )
    if have and x != "compute":
        cs, ys = [r["compute"] for r in have], [r[x] for r in have]
        data = [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "x": cs,
                "y": ys,
                "name": COST_AXES[x],
                "line": {"color": PALETTE[0]},
            }
        ]
        if all(r.get(f"{x}_lo") is not None for r in have):
            data.insert(
                0, band(cs, [r[f"{x}_lo"] for r in have], [r[f"{x}_hi"] for r in have], f"{pct} interval (MFU spread)")
            )
        figs.append(
            fig(
                "plan_cost_compute",
                f"{COST_AXES[x]} vs compute budget",
                data,
                COST_AXES["compute"],
                COST_AXES[x],
                logy=True,
            )
        )
    return figs


CSV_COLUMNS = [
    "compute",
    "verdict",
    "model",
    "preset",
    "shape_rule",
    "N",
    "tokens",
    "loss",
    "loss_lo",
    "loss_hi",
    "loss_at_optimum",
    "N_opt",
    "N_opt_lo",
    "N_opt_hi",
    "D_opt",
    "device_hours",
    "device_hours_lo",
    "device_hours_hi",
    "days",
    "days_lo",
    "days_hi",
    "usd",
    "usd_lo",
    "usd_hi",
    "tokens_per_s",
    "mfu",
    "layout",
    "hardware_flops",
    "pareto",
]
