"""The main job's last section: the next sweep for its 10x target (`scalelab study next`, with the
IsoFLOP sweep's own FLOPs as the budget), written as plan/next.yaml, and its cost in CPU-minutes at
the CPU seconds per FLOP this study's IsoFLOP sweep measured."""

from __future__ import annotations

from pathlib import Path

TARGET_MULTIPLIER = 10.0
MAX_RUNS = 8


def next_sweep_section(out: Path, fits: Path, study: dict | None) -> list[str]:
    from scaling.core.errors import InputError  # deferred: imports numpy (a fast scalelab --help)
    from scaling.fits.record import FitRecord
    from scaling.planning.next_runs import format_proposal, propose, sweep_files
    from scaling.planning.plan import budget

    a3, a2 = fits / "chinchilla-a3.json", fits / "chinchilla-a2.json"
    head = ["\n## What to run next\n"]
    if not a3.exists() or not study or not study.get("flops_computed"):
        return head + ["(no approach-3 fit or no IsoFLOP sweep compute: nothing to design from)\n"]
    recs = [FitRecord.load(a3)] + ([FitRecord.load(a2)] if a2.exists() else [])
    spend = float(study["flops_computed"])
    try:
        target = budget(recs[0], TARGET_MULTIPLIER)
        prop = propose(recs, target, budget=spend, max_runs=MAX_RUNS)
        spec, _ = sweep_files(prop, recs, out / "plan" / "next.yaml", name="next")
    except InputError as exc:
        return head + [f"`scalelab study next` proposed nothing: {exc}\n"]
    text = [
        f"`scalelab study next` for {TARGET_MULTIPLIER:g}x the largest IsoFLOP budget ({target:.3g} FLOPs), "
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
        "then refit and re-plan.\n"
    )
    return head + text
