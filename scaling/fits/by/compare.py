"""`fit chinchilla --by KEY` and `fit batch-lr --by KEY`: one law per value, and the comparison.

The chinchilla record (law chinchilla, approach 3, `by` set) holds each value's law under
`groups` and `compare`:

    compare: {baseline, definition, reference, others: {name: {compute_multiplier, interval,
              loss, compute, levels: [{C, loss, compute_multiplier, interval, where}], scale_dependent,
              identified, n_pairs, n_never_reached, note}}}

compute_multiplier = C_baseline(L) / C_other(L) at compute-optimal allocation (scaling.laws.multiplier),
read at the loss L the other law reaches at the largest compute among its runs (`reference`);
`levels` repeats it at the other's smallest compute and 10x beyond its largest (extrapolation),
since when the laws' exponents differ the multiplier depends on scale. Intervals are percentile
intervals of the multiplier over pairs of bootstrap resamples (resample i of each group; groups
resampled independently).
"""

from __future__ import annotations

import re

import numpy as np

from scaling.core.bootstrap import interval as bs_interval
from scaling.core.conventions import TokenCost, check_kinds
from scaling.core.errors import InputError
from scaling.data import inputs
from scaling.fits import pipeline
from scaling.fits.batch_lr import fit_batch_lr
from scaling.fits.by import groups as by_groups
from scaling.fits.chinchilla.approaches import _resolve_compute, fit_chinchilla
from scaling.fits.record import FitRecord
from scaling.laws import multiplier
from scaling.laws.allocation import search_range

EXTRAPOLATE = 10.0  # the third level: this factor beyond the other's largest compute
SCALE_DEPENDENT = 0.05  # without resamples: multipliers across levels differing by more than 5% are scale-dependent
DEFINITION = (
    "compute_multiplier = C_baseline(L) / C_other(L): the compute "
    "the baseline needs to reach loss L over the compute the other "
    "needs, both at compute-optimal allocation of their fitted laws; > 1 means the other is more compute-efficient"
)


def fit_chinchilla_by(
    data,
    *,
    by: str,
    baseline: str | None = None,
    columns=None,
    n_kind: str = "total",
    compute_kind: str | None = None,
    approach: int = 3,
    law: str = "chinchilla",
    bootstrap: int = 0,
    seed: int = 0,
    ci: float = 0.95,
    **kwargs,
) -> FitRecord:
    """Fit the approach-3 Chinchilla law to each value of `by` and compare them by compute multiplier."""
    if approach != 3:
        raise InputError(
            f"--by compares laws by the loss they reach: it needs --approach 3 (got --approach {approach})"
        )
    if law != "chinchilla":
        raise InputError(f"--by fits the Chinchilla law per group (got --law {law})")
    pipeline.FitOptions(bootstrap=bootstrap, seed=seed, ci=ci, holdout=kwargs.get("holdout")).check()
    ds = pipeline.load(data, columns, n_kind)
    check_kinds(ds.n_kind, compute_kind)
    inputs.validate(ds, ("N", "D", "loss"), min_points=1, law="chinchilla --by")
    values, kind = by_groups.group_values(ds, data, by)
    groups, base = by_groups.order(values, baseline)
    warnings = list(ds.warnings)
    compute_kind = _resolve_compute(ds.df, ds.n_kind, compute_kind, warnings)  # one convention for every group
    fitted, gw = by_groups.fit_groups(
        fit_chinchilla,
        ds,
        values,
        groups,
        by,
        seed=seed,
        approach=3,
        bootstrap=bootstrap,
        ci=ci,
        compute_kind=compute_kind,
        **kwargs,
    )
    warnings += gw
    cmp = compare_block(fitted, groups, base, ci)
    if cmp.get("note"):
        warnings.append(cmp["note"])
    first = next(e["record"] for e in fitted.values() if e["fitted"])
    return pipeline.record(
        law="chinchilla",
        approach=3,
        by=by,
        params={},
        intervals={},
        objective=float(sum(e["record"]["objective"] or 0.0 for e in fitted.values() if e["fitted"])),
        n_points=len(ds.df),
        warnings=warnings,
        data_sha256=by_groups.sha(ds, values, ("N", "D", "loss")),
        n_kind=ds.n_kind,
        conventions={k: v for k, v in first["conventions"].items() if k != "token_cost"},
        source=ds.source,
        columns=ds.columns,
        settings={**first["settings"], "by": by_groups.by_settings(by, kind, base, groups, seed)},
        groups=fitted,
        compare=cmp,
    )


def _cost(rec: dict) -> tuple[TokenCost, tuple[float, float]]:
    return TokenCost.from_record(rec), search_range(np.asarray(rec["data_range"]["N"], dtype=float))


def compare_block(fitted: dict, groups: list[str], base: str, ci: float) -> dict:
    out: dict = {
        "baseline": base,
        "definition": DEFINITION,
        "reference": "the loss each other law reaches at the largest compute "
        "among its own runs; levels: its smallest compute, "
        f"its largest, and {EXTRAPOLATE:g}x beyond (extrapolation)",
        "interval_method": f"{int(round(100 * ci))}% percentile interval over pairs "
        "(resample i of each group; groups resampled independently)",
        "others": {},
    }
    b = fitted[base]
    if not b["fitted"]:
        out["note"] = f"the baseline {base} has no fitted law ({b['reason']}): no compute multiplier"
        for g in groups[1:]:
            out["others"][g] = {"compute_multiplier": None, "interval": None, "note": out["note"]}
        return out
    brec = b["record"]
    bcost, brange = _cost(brec)
    bdraws = multiplier.draws((brec.get("bootstrap") or {}).get("samples"))
    for g in groups[1:]:
        e = fitted[g]
        if not e["fitted"]:
            out["others"][g] = {
                "compute_multiplier": None,
                "interval": None,
                "identified": False,
                "note": f"{g} has no fitted law: {e['reason']}",
            }
            continue
        out["others"][g] = _one(brec, e["record"], bcost, brange, bdraws, ci, b["identified"] and e["identified"])
    return out


def _one(brec, orec, bcost, brange, bdraws, ci, identified) -> dict:
    ocost, orange = _cost(orec)
    cmin, cmax = orec["data_range"]["C"]
    odraws = multiplier.draws((orec.get("bootstrap") or {}).get("samples"))
    pairs = list(zip(bdraws, odraws))
    levels, level_draws = [], []
    for c, where in (
        (cmax, "largest compute of its runs"),
        (cmin, "smallest compute of its runs"),
        (cmax * EXTRAPOLATE, f"{EXTRAPOLATE:g}x its largest compute (extrapolation)"),
    ):
        m, L = multiplier.multiplier(brec["params"], orec["params"], c, bcost, ocost, brange, orange)
        row = {"C": c, "loss": L, "compute_multiplier": m if np.isfinite(m) else None, "where": where}
        if not np.isfinite(m):
            row["note"] = (
                "the baseline never reaches this loss (it is at or below its E)"
                if np.isinf(m)
                else "no answer within the searched sizes"
            )
        if pairs:
            ms = [multiplier.multiplier(bp, op, c, bcost, ocost, brange, orange)[0] for bp, op in pairs]
            row["interval"], row["n_never_reached"] = multiplier.draw_interval(ms, ci)
            level_draws.append(np.asarray(ms, dtype=float))
        levels.append(row)
    head = levels[0]
    ms = [r["compute_multiplier"] for r in levels if r["compute_multiplier"] is not None]
    out = {
        "compute_multiplier": head["compute_multiplier"],
        "interval": head.get("interval"),
        "loss": head["loss"],
        "compute": head["C"],
        "levels": levels,
        "identified": bool(identified),
        "n_pairs": len(pairs),
        "loss_exponent": {
            "baseline": multiplier.loss_exponent(brec["params"]),
            "other": multiplier.loss_exponent(orec["params"]),
        },
        "scale_dependent": bool(len(ms) >= 2 and max(ms) / min(ms) - 1 > SCALE_DEPENDENT),
    }
    if len(level_draws) == 3:  # with resamples: scale-dependent when the ratio's interval excludes 1, not on noise
        with np.errstate(all="ignore"):
            ratio = level_draws[2] / level_draws[1]
        iv = bs_interval(ratio[np.isfinite(ratio)], ci)
        out["scale_ratio"] = {
            "definition": "multiplier at 10x the largest compute / at the smallest compute",
            "interval": iv,
        }
        if iv is not None:
            out["scale_dependent"] = bool(iv[0] > 1 or iv[1] < 1)
    notes = []
    ratio_iv = (out.get("scale_ratio") or {}).get("interval")
    if not out["scale_dependent"] and ratio_iv and len(ms) >= 2 and max(ms) / min(ms) - 1 > SCALE_DEPENDENT:
        notes.append(
            f"the levels' point estimates differ ({min(ms):.3g} to "
            f"{max(ms):.3g}) but the resamples do not resolve a change with scale "
            f"(ratio interval [{ratio_iv[0]:.3g}, {ratio_iv[1]:.3g}] includes 1)"
        )
    poor = {
        side: sorted(
            {m[1] for w in rec.get("warnings") or [] for m in [re.match(r"(\w+) is poorly identified", w)] if m}
        )
        for side, rec in (("baseline", brec), ("other", orec))
    }
    if poor["baseline"] or poor["other"]:
        notes.append(
            "poorly identified (interval wider than a factor 2): "
            + "; ".join(f"{side} {', '.join(v)}" for side, v in poor.items() if v)
            + ": the multiplier's interval carries that uncertainty"
        )
    if out["scale_dependent"]:
        notes.append(
            f"the multiplier depends on scale ({min(ms):.3g} to {max(ms):.3g} "
            "across the levels): the laws' compute exponents differ "
            "(gamma = alpha beta / (alpha + beta): baseline "
            f"{out['loss_exponent']['baseline']:.3g}, other {out['loss_exponent']['other']:.3g}); "
            "read it at the stated compute"
        )
    if not pairs:
        notes.append("no interval: fit with --bootstrap N")
    if not identified:
        notes.append("a law in this comparison is not identified: the multiplier is not a measurement")
    if head.get("n_never_reached"):
        notes.append(
            f"in {head['n_never_reached']} of {len(pairs)} resample pairs the "
            "baseline never reaches the loss: the interval's upper end is unbounded"
        )
    if notes:
        out["note"] = "; ".join(notes)
    return out


def fit_batch_lr_by(
    data, *, by: str, columns=None, n_kind: str = "total", bootstrap: int = 0, seed: int = 0, ci: float = 0.95, **kwargs
) -> FitRecord:
    """The batch/lr law of each value of `by` (no multiplier: the laws are printed side by side)."""
    pipeline.FitOptions(bootstrap=bootstrap, seed=seed, ci=ci, holdout=kwargs.get("holdout")).check()
    ds = pipeline.load(data, columns, n_kind)
    inputs.validate(ds, ("N", "D", "loss", "lr", "batch_tokens"), min_points=1, law="batch-lr --by")
    values, kind = by_groups.group_values(ds, data, by)
    groups, base = by_groups.order(values, None)
    fitted, warnings = by_groups.fit_groups(
        fit_batch_lr, ds, values, groups, by, seed=seed, bootstrap=bootstrap, ci=ci, **kwargs
    )
    first = next(e["record"] for e in fitted.values() if e["fitted"])
    return pipeline.record(
        law="batch-lr",
        approach=None,
        by=by,
        params={},
        intervals={},
        objective=float(sum(e["record"]["objective"] or 0.0 for e in fitted.values() if e["fitted"])),
        n_points=len(ds.df),
        warnings=list(ds.warnings) + warnings,
        data_sha256=by_groups.sha(ds, values, ("N", "D", "loss", "lr", "batch_tokens")),
        n_kind=ds.n_kind,
        conventions=first.get("conventions"),
        source=ds.source,
        columns=ds.columns,
        settings={**first["settings"], "by": by_groups.by_settings(by, kind, None, groups, seed)},
        groups=fitted,
    )


# ---------------------------------------------------------------- text
def _fmt(v, iv=None, digits=4) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    s = f"{v:.{digits}g}"
    if iv and iv[0] is not None:
        s += f" [{iv[0]:.3g}, {'inf' if iv[1] is None else format(iv[1], '.3g')}]"
    return s


def summary(rec: dict) -> str:
    """Side by side: one column per value of the --by key, one row per parameter; then `compare`."""
    by, groups = rec["by"], rec.get("groups") or {}
    conv = rec.get("conventions") or {}
    head = f"law: {rec['law']}" + (f" (approach {rec['approach']})" if rec.get("approach") else "") + f", one per {by}"
    lines = [
        head,
        f"conventions: N = {conv.get('n_kind', rec.get('n_kind'))} parameters"
        + (f" ({conv['n_source']})" if conv.get("n_source") else "")
        + (f", compute = {conv['compute']}" if conv.get("compute") else ""),
    ]
    names = list(groups)
    keys = []
    for e in groups.values():
        for k, v in ((e.get("record") or {}).get("params") or {}).items():
            if k not in keys and isinstance(v, (int, float)):
                keys.append(k)
    cells = [[f"{by} =", *names], ["points", *[str(groups[g]["n_points"]) for g in names]]]
    for k in keys:
        row = [k]
        for g in names:
            r = groups[g].get("record") or {}
            row.append(_fmt((r.get("params") or {}).get(k), (r.get("intervals") or {}).get(k)))
        cells.append(row)
    ho = {g: ((groups[g].get("record") or {}).get("holdout") or {}) for g in names}
    if any(h.get("mean_abs_rel_error") is not None for h in ho.values()):
        cells.append(
            ["held-out mean |rel err|", *[_fmt(h.get("mean_abs_rel_error"), None, 3) for h in ho.values()]]
        )  # mean |rel err| on the held-out runs
    cells.append(["identified", *[("yes" if groups[g]["identified"] else "NO") for g in names]])
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    for r in cells:
        lines.append("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    for g in names:
        if not groups[g]["identified"]:
            lines.append(f"  {g}: not identified: {groups[g].get('reason')}")
    cmp = rec.get("compare")
    if cmp:
        lines.append(f"compare (baseline {cmp['baseline']}): {cmp['definition']}")
        for g, o in cmp["others"].items():
            if o.get("compute_multiplier") is None and not o.get("levels"):
                lines.append(f"  {g}: no compute multiplier: {o.get('note')}")
                continue
            lines.append(
                f"  {g} over {cmp['baseline']}: compute multiplier "
                f"{_fmt(o['compute_multiplier'], o.get('interval'), 3)}"
                f" at loss {o['loss']:.4g} ({g}'s loss at C = {o['compute']:.3g}, the largest compute of its runs)"
            )
            for lv in o["levels"][1:]:
                lines.append(
                    f"    at C = {lv['C']:.3g} ({lv['where']}; loss {lv['loss']:.4g}): "
                    f"{_fmt(lv['compute_multiplier'], lv.get('interval'), 3)}"
                    + (f" ({lv['note']})" if lv.get("note") else "")
                )
            if o.get("note"):
                lines.append(f"    note: {o['note']}")
        lines.append(f"  intervals: {cmp['interval_method']}")
    for w in rec.get("warnings", []):
        lines.append(f"warning: {w}")
    return "\n".join(lines)
