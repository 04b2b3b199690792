"""The main job's last section: the next sweep for its 10x target (`scalelab study next`, with the
IsoFLOP sweep's own FLOPs as the budget), written as plan/next.yaml, and its cost in CPU-minutes at
the CPU seconds per FLOP this study's IsoFLOP sweep measured. With `plan.next_sweep` the job trains
it, refits approach 3 on the IsoFLOP runs and the new ones (fits/chinchilla-a3-next.json, the first
fit's settings) and re-plans: plan/next-replan.json holds the verdicts at 10x and 1000x before and after.
"""

from __future__ import annotations

import json
from pathlib import Path

TARGET_MULTIPLIER = 10.0
FAR_MULTIPLIER = 1000.0
MAX_RUNS = 8
FORECAST_DRAWS = 2  # futures of the refit forecast (study next's default is 4): each costs 1 + B refits of the law


def _records(fits: Path) -> list:
    from scaling.fits.record import FitRecord  # deferred: imports numpy (a fast scalelab --help)

    a3, a2 = fits / "chinchilla-a3.json", fits / "chinchilla-a2.json"
    return [FitRecord.load(a3)] + ([FitRecord.load(a2)] if a2.exists() else [])


def propose_next(out: Path, fits: Path, study: dict | None):
    """(proposal, sweep spec path), or the reason there is none (a string)."""
    from scaling.core.errors import InputError  # deferred: imports numpy (a fast scalelab --help)
    from scaling.planning.next_runs import propose, sweep_files
    from scaling.planning.plan import budget

    if not (fits / "chinchilla-a3.json").exists() or not study or not study.get("flops_computed"):
        return "no approach-3 fit or no IsoFLOP sweep compute: nothing to design from"
    recs = _records(fits)
    try:
        prop = propose(
            recs,
            budget(recs[0], TARGET_MULTIPLIER),
            budget=float(study["flops_computed"]),
            max_runs=MAX_RUNS,
            forecast_draws=FORECAST_DRAWS,
        )
        spec, _ = sweep_files(prop, recs, out / "plan" / "next.yaml", name="next")
    except InputError as exc:
        return f"`scalelab study next` proposed nothing: {exc}"
    return prop, spec


def refit_and_replan(out: Path, fits: Path, iso_runs: Path, next_runs: Path) -> dict:
    """Approach 3 on the IsoFLOP runs and the next sweep's (the first fit's settings and conventions),
    and the verdicts at 10x and 1000x the largest IsoFLOP budget before and after."""
    import pandas as pd  # deferred: pandas is slow to import

    from scaling.data import inputs
    from scaling.fits.chinchilla.approaches import fit_chinchilla
    from scaling.planning.plan import budget, make_plan

    recs = _records(fits)
    a3 = recs[0]
    st, conv = a3.get("settings") or {}, a3.get("conventions") or {}
    n_kind = conv.get("n_kind", "total")
    df = pd.concat([inputs.load(d, None, n_kind).df for d in (iso_runs, next_runs)], ignore_index=True)
    after = fit_chinchilla(
        df,
        bootstrap=int(st.get("bootstrap") or 100),
        seed=int(st.get("seed") or 0),
        n_kind=n_kind,
        compute_kind=conv.get("compute"),
        max_embedding_fraction=st.get("max_embedding_fraction"),
    )
    after.save(fits / "chinchilla-a3-next.json")
    out_d: dict = {"n_points_before": a3.get("n_points"), "n_points_after": after.get("n_points"), "budgets": []}
    for m in (TARGET_MULTIPLIER, FAR_MULTIPLIER):
        C = budget(a3, m)
        row = {"multiplier": m, "compute": C}
        for name, rec in (("before", a3), ("after", after)):
            v = make_plan([rec, *recs[1:]], C)["verdict"]
            keep = ("status", "N_opt_interval", "N_opt_span", "loss_interval", "no_optimum_fraction", "reasons")
            row[name] = {k: v.get(k) for k in keep} | {
                "exponent": next(
                    (r for r in (v.get("exponents") or {}).get("approaches", []) if r["approach"] == 3), None
                )
            }
        out_d["budgets"].append(row)
    (out / "plan" / "next-replan.json").write_text(json.dumps(out_d, indent=2) + "\n")
    return out_d


def next_sweep_section(out: Path, fits: Path, study: dict | None) -> list[str]:
    from scaling.planning.next_runs import format_proposal

    head = ["\n## What to run next\n"]
    got = propose_next(out, fits, study)
    if isinstance(got, str):
        return head + [f"({got})\n"]
    prop, spec = got
    spend = float(study["flops_computed"])
    text = [
        f"`scalelab study next` for {TARGET_MULTIPLIER:g}x the largest IsoFLOP budget ({prop.target:.3g} FLOPs), "
        f"spending at most the IsoFLOP sweep's own {spend:.3g} FLOPs in at most {MAX_RUNS} runs:\n",
        f"```\n{format_proposal(prop)}\n```\n",
    ]
    if study.get("cpu_s"):
        per = study["cpu_s"] / spend
        text.append(
            f"Cost: about {prop.spent * per / 60:.3g} CPU-minutes at this sweep's {per:.3g} CPU seconds per FLOP "
            f"({study['cpu_s']:.0f} CPU s for {spend:.3g} FLOPs).\n"
        )
    text.append(
        f"Sweep spec: `{spec.relative_to(out)}`: `scalelab sweep launch {spec} --executor local`, "
        "then refit and re-plan (`plan.next_sweep: true` does it).\n"
    )
    replan = out / "plan" / "next-replan.json"
    if replan.exists():
        text += _before_after(json.loads(replan.read_text()))
    return head + text


def _before_after(d: dict) -> list[str]:
    def iv(x):
        return f"[{x[0]:.4g}, {x[1]:.4g}]" if x else "–"

    rows = []
    for b in d["budgets"]:
        for name in ("before", "after"):
            v = b[name]
            e = v.get("exponent") or {}
            rows.append(
                f"| {b['multiplier']:g}x ({b['compute']:.3g}) | {name} | {v['status']} | {iv(v.get('N_opt_interval'))} "
                f"| {iv(v.get('loss_interval'))} | "
                + (f"{e['a']:.3g} {iv(e.get('interval'))}" if e else "–")
                + f" | {(v.get('no_optimum_fraction') or 0):.0%} |"
            )
    return [
        f"\nTrained (`plan.next_sweep`), refitted on {d['n_points_after']} runs (from {d['n_points_before']}: "
        "`fits/chinchilla-a3-next.json`) and re-planned:\n",
        "| budget | | verdict | N_opt interval | loss at the optimum | approach 3's a | laws without an optimum |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
