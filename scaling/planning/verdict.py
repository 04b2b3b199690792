"""The plan's verdict: does the law answer at this budget, before any of its numbers are read?

A law fitted on small runs always returns an N_opt; whether that number means anything at a budget
far beyond the runs is a separate question, answered here from the fit's own bootstrap:

* the 95% (the plan's `ci`) intervals of N_opt, D_opt and the loss at the optimum at the budget
  (parameter uncertainty only: what more runs can shrink; the planned run's prediction interval adds
  a single run's scatter);
* the extrapolation factor beyond the largest fitted compute;
* whether the approaches given (2 and 3, or 1) agree on the compute-optimal exponent a (N_opt ∝ C^a):
  the `ci` interval of the difference of their bootstrap draws (resamples paired at random: the two
  bootstraps are independent) must contain 0; without draws of one of them, its point estimate must
  lie inside the other's interval.

"not identified at this budget" when N_opt's interval spans more than `max_span` (default
IDENTIFIED_SPAN = 4x, `scalelab plan --identified-span`), when more than 1 - ci of the bootstrap
laws have no interior optimum at the budget (their N_opt ran off the search range, so the interval
printed from the rest understates the spread), or when the approaches disagree. Without bootstrap
samples the verdict is "unchecked". A batch-lr record the plan uses gets its own (`batch_lr`): not
identified with fewer than 3 compute groups, an lr or batch interval at the run wider than the same
span, or an exponent whose interval contains 0. The warnings that explain a verdict (identification, bounds,
extrapolation, frontier budgets) are grouped under it; `scalelab plan --emit-config` refuses a
not-identified plan unless --force.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from scaling.core.bootstrap import interval
from scaling.core.errors import InputError

IDENTIFIED_SPAN = 4.0
IDENTIFIED = "identified"
NOT_IDENTIFIED = "not identified at this budget"
UNCHECKED = "unchecked"
# warnings of the fits and the plan that bear on whether the law answers at the budget
_EXPLAINS = re.compile(
    r"identified|on its bound|on a bound|extrapolation|intervals understate|barely constrained|"
    r"smallest or largest size|no usable parabola|far outside the fitted|below the smallest fitted|"
    r"bootstrap resamples (failed|gave no)|frontier points|differ by more than that interval",
    re.I,
)


def exponent_draws(rec) -> tuple[float | None, np.ndarray | None]:
    """The compute-optimal exponent a of a chinchilla record (N_opt ∝ C^a) and its bootstrap draws:
    beta / (alpha + beta) for approach 3 (the fresh-data frontier of a data-constrained law), the
    fitted slope for approaches 1 and 2."""
    p = rec.get("params") or {}
    s = (rec.get("bootstrap") or {}).get("samples") or {}
    if rec.get("approach") == 3:
        if p.get("alpha") is None or p.get("beta") is None:
            return None, None
        a = float(p["beta"]) / (float(p["alpha"]) + float(p["beta"]))
        if "alpha" in s and "beta" in s:
            n = min(len(s["alpha"]), len(s["beta"]))
            al, be = (
                np.asarray([np.nan if v is None else v for v in s[k][:n]], dtype=float) for k in ("alpha", "beta")
            )
            with np.errstate(all="ignore"):
                return a, be / (al + be)
        return a, None
    fitted = p.get("a")
    if fitted is None:
        return None, None
    draws = np.asarray([np.nan if v is None else v for v in s["a"]], dtype=float) if "a" in s else None
    return float(fitted), draws


def compare_exponents(main, others: list, ci: float, seed: int = 0) -> dict | None:
    """The compute-optimal exponent of each approach given, and whether each other approach agrees
    with the planning one within their intervals (see the module docstring)."""
    a0, d0 = exponent_draws(main)
    if a0 is None or not others:
        return None
    rows = [_exponent_row(main, a0, d0, ci)]
    agree = True
    rng = np.random.default_rng(seed)
    for o in others:
        a1, d1 = exponent_draws(o)
        if a1 is None:
            continue
        row = _exponent_row(o, a1, d1, ci)
        if d0 is not None and d1 is not None:
            x0, x1 = d0[np.isfinite(d0)], d1[np.isfinite(d1)]
            n = min(x0.size, x1.size)
            diff = interval(rng.permutation(x0)[:n] - rng.permutation(x1)[:n], ci) if n >= 2 else None
            row["difference_interval"] = diff
            row["agrees"] = bool(diff is None or diff[0] <= 0 <= diff[1])
        else:
            iv0, iv1 = rows[0].get("interval"), row.get("interval")
            inside = [iv is None or iv[0] <= v <= iv[1] for iv, v in ((iv0, a1), (iv1, a0))]
            row["agrees"] = bool(all(inside))
        agree &= row["agrees"]
        rows.append(row)
    if len(rows) < 2:
        return None
    return {"approaches": rows, "agree": agree}


def _exponent_row(rec, a, draws, ci) -> dict:
    row = {"approach": rec.get("approach"), "a": a}
    iv = interval(draws, ci) if draws is not None else None
    if iv:
        row["interval"] = iv
    return row


def check_span(max_span: float) -> float:
    if not (max_span > 1 and np.isfinite(max_span)):
        raise InputError(f"--identified-span must be a factor > 1 (got {max_span})")
    return float(max_span)


def batch_lr_verdict(h, plan: dict, max_span: float) -> dict:
    """The batch/LR law's verdict at the planned run: not identified when it has no exponents (fewer
    than 3 compute groups: two optima determine a line exactly), when its lr or batch interval at the
    run spans more than `max_span`, or when an exponent's interval contains 0."""
    ci = plan.get("ci", 0.95)
    reasons: list[str] = []
    st = h.get("settings") or {}
    n_groups = (h.get("diagnostics") or {}).get("n_groups")
    out: dict = {"n_groups": n_groups}
    if st.get("exponents") not in (None, "fitted"):
        reasons.append(f"batch-lr law {st['exponents']}")
    target = plan["run"] if plan.get("run") and "lr" in plan["run"] else plan
    for key, name in (("lr", "lr"), ("batch_tokens", "batch")):
        iv = target.get(f"{key}_interval")
        if iv and iv[0] > 0:
            out[f"{key}_interval"], out[f"{key}_span"] = iv, iv[1] / iv[0]
            if iv[1] / iv[0] > max_span:
                reasons.append(
                    f"the {name}'s {ci:.0%} interval [{iv[0]:.3g}, {iv[1]:.3g}] at the run spans {iv[1] / iv[0]:.3g}x "
                    f"(more than {max_span:g}x)"
                )
    for k, iv in (h.get("intervals") or {}).items():
        if "exp" in k and iv and iv[0] is not None and iv[1] is not None and iv[0] <= 0 <= iv[1]:
            reasons.append(f"{k}'s interval [{iv[0]:.3g}, {iv[1]:.3g}] contains 0: its sign is not measured")
    if not reasons and not out.get("lr_interval"):
        out["status"] = UNCHECKED
        reasons.append("no bootstrap samples: the law's uncertainty at the run is unknown (fit with --bootstrap N)")
    else:
        out["status"] = NOT_IDENTIFIED if reasons else IDENTIFIED
    out["reasons"] = reasons
    return out


def make_verdict(
    plan: dict, ch, others: list, *, max_span: float = IDENTIFIED_SPAN, edge_fraction=None, batch_lr=None
) -> dict:
    """The verdict block of `plan` (a make_plan dict) for the chinchilla record `ch` it planned from;
    `others`: further chinchilla records of other approaches (compared on the exponent);
    `edge_fraction`: the share of bootstrap laws with no interior optimum at the budget;
    `batch_lr`: the batch-lr record the plan took lr and batch from (its own verdict, `batch_lr`)."""
    max_span = check_span(max_span)
    ci = plan.get("ci", 0.95)
    out: dict = {"max_span": max_span}
    reasons: list[str] = []
    for key in ("N_opt", "D_opt"):
        if plan.get(f"{key}_interval"):
            out[f"{key}_interval"] = plan[f"{key}_interval"]
    if plan.get("loss_at_optimum_interval"):
        out["loss_interval"] = plan["loss_at_optimum_interval"]
    if plan.get("extrapolation_factor") is not None:
        out["extrapolation_factor"] = plan["extrapolation_factor"]
    iv = plan.get("N_opt_interval")
    if iv and iv[0] > 0:
        out["N_opt_span"] = iv[1] / iv[0]
        if out["N_opt_span"] > max_span:
            reasons.append(
                f"N_opt's {ci:.0%} interval [{iv[0]:.3g}, {iv[1]:.3g}] spans {out['N_opt_span']:.3g}x "
                f"(more than {max_span:g}x): the runs do not pin the optimum down at this budget"
            )
    if edge_fraction is not None:
        out["no_optimum_fraction"] = edge_fraction
        if edge_fraction > 1 - ci:
            reasons.append(
                f"{edge_fraction:.0%} of the bootstrap laws have no optimum inside the search range at this "
                "budget: N_opt's interval, drawn from the rest, understates the spread"
            )
    cmp = compare_exponents(ch, others, ci)
    if cmp:
        out["exponents"] = cmp
        if not cmp["agree"]:
            reasons.append(
                "the approaches disagree on the compute-optimal exponent a (N_opt ∝ C^a): "
                + "; ".join(
                    f"approach {r['approach']} a = {r['a']:.3g}"
                    + (f" [{r['interval'][0]:.3g}, {r['interval'][1]:.3g}]" if r.get("interval") else "")
                    for r in cmp["approaches"]
                )
            )
    if not iv:
        out["status"] = UNCHECKED
        reasons.append("no bootstrap samples: the law's uncertainty at this budget is unknown (fit with --bootstrap N)")
    else:
        out["status"] = NOT_IDENTIFIED if reasons else IDENTIFIED
    out["reasons"] = reasons
    out["warnings"] = [w for w in plan.get("warnings") or [] if _EXPLAINS.search(w)]
    if not cmp and ch.get("approach") == 3:
        out["note"] = "approach 2 not given: the exponent was not cross-checked (plan A3.json A2.json)"
    if batch_lr is not None:
        out["batch_lr"] = batch_lr_verdict(batch_lr, plan, max_span)
    return out


def identified(plan: Mapping[str, Any]) -> bool:
    """False when the law (or the batch-lr law whose lr and batch the run takes) is not identified."""
    v = plan.get("verdict") or {}
    used = bool((plan.get("run") or plan).get("lr"))
    return v.get("status") != NOT_IDENTIFIED and not (
        used and (v.get("batch_lr") or {}).get("status") == NOT_IDENTIFIED
    )


def format_verdict(v: dict, ci: float = 0.95) -> list[str]:
    """The verdict as the first lines of the printed plan, the warnings that explain it under it."""

    def iv(x):
        return f"[{x[0]:.4g}, {x[1]:.4g}]" if x else "–"

    lines = [f"verdict: {v['status'].upper()}"]
    bits = []
    if "N_opt_interval" in v:
        bits.append(
            f"N_opt {iv(v['N_opt_interval'])} ({v.get('N_opt_span', float('nan')):.3g}x; limit {v['max_span']:g}x)"
        )
    if "D_opt_interval" in v:
        bits.append(f"D_opt {iv(v['D_opt_interval'])}")
    if "loss_interval" in v:
        bits.append(f"loss at the optimum {iv(v['loss_interval'])}")
    if bits:
        lines.append(f"  {ci:.0%} bootstrap intervals at this budget: " + "; ".join(bits))
    if v.get("extrapolation_factor") is not None:
        lines.append(f"  extrapolation: {v['extrapolation_factor']:.3g}x the largest fitted compute")
    cmp = v.get("exponents")
    if cmp:
        lines.append(
            "  compute-optimal exponent a: "
            + "; ".join(
                f"approach {r['approach']} {r['a']:.3g}" + (f" {iv(r.get('interval'))}" if r.get("interval") else "")
                for r in cmp["approaches"]
            )
            + (" (agree)" if cmp["agree"] else " (DISAGREE)")
        )
    elif v.get("note"):
        lines.append(f"  {v['note']}")
    lines += [f"  because: {r}" for r in v.get("reasons") or [] if v["status"] != IDENTIFIED]
    lines += [f"  - {w}" for w in v.get("warnings") or []]
    hp = v.get("batch_lr")
    if hp:
        lines.append(
            f"  batch-lr law: {hp['status']}"
            + (f" ({hp['n_groups']} compute groups)" if hp.get("n_groups") is not None else "")
            + "".join(f"; {r}" for r in hp.get("reasons") or [])
        )
    if v["status"] == NOT_IDENTIFIED:
        lines.append("  next: `scalelab study next` proposes the runs that would identify it")
    return lines
