"""What the main job's IsoFLOP study cost and gave: its (N, D, loss) points, the compute with each
shared prefix counted once, and points per CPU hour (the figure issue 16 compares between cosine
runs and WSD branches)."""

from __future__ import annotations

from pathlib import Path

from rundir.read import compute_totals, find_run_dirs
from rundir.summary import read_summary


def isoflop_study(root: Path, iso_cfg, wall_s: float | None, cpu_s: float | None) -> dict:
    """Summary of the IsoFLOP sweep under `root`: every finished run's end is one point (the
    stable runs and branches of schedule wsd each end in their own cooldown)."""

    rows = [s for s in (read_summary(d) or {} for d in find_run_dirs(root)) if s.get("status") == "done"]
    computed, separate = compute_totals(rows)
    points = len(rows)
    branches = sum(1 for s in rows if s.get("init_from"))
    if iso_cfg.schedule == "wsd":
        w = iso_cfg.wsd
        source = (
            f"WSD cooldown branches ({points - branches} stable runs, "
            f"each ending in its own cooldown, and {branches} branches; "
            f"{w.decay_shape} cooldown over {w.cooldown:.0%} of each run's steps)"
        )
    else:
        anchors = sum(1 for s in rows if str(s.get("name", "")).startswith("anchor-"))  # isoflop.anchors' names
        source = f"separate cosine runs ({points}" + (
            f": {points - anchors} at the budgets, {anchors} anchor{'s' * (anchors != 1)})" if anchors else ")"
        )
    per_cpu_h = points / (cpu_s / 3600) if cpu_s else None
    line = (
        f"IsoFLOP points: {points} from {source}; compute {computed:.3g} FLOPs"
        + (f" ({separate:.3g} as separate runs, saving {1 - computed / separate:.0%})" if separate > computed else "")
        + (f"; sweep {wall_s:.0f} s wall" if wall_s else "")
        + (f", {cpu_s:.0f} CPU s: {per_cpu_h:.1f} points per CPU hour" if per_cpu_h else "")
    )
    return {
        "schedule": iso_cfg.schedule,
        "source": source,
        "points": points,
        "branches": branches,
        "flops_computed": computed,
        "flops_separate": separate,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "points_per_cpu_hour": per_cpu_h,
        "line": line,
    }
