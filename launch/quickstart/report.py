"""report.md of the main job: tables, fits, the plan and its honest test, with the plots."""

from __future__ import annotations

import json
from pathlib import Path

from launch.quickstart.next_sweep import next_sweep_section
from rundir.layout import RunDir
from rundir.read import find_run_dirs
from scaling.planning.record import PlanRecord


def _fmt(v, spec=".4g") -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    return format(v, spec) if isinstance(v, (int, float)) else str(v)


def _table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _evals(run: Path) -> dict[str, float]:
    """{task/metric: value} of the run's newest evals file (headline metric per task)."""
    files = sorted(RunDir(run).evals.glob("*.json"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1)
    if not files:
        return {}
    doc = json.loads(files[-1].read_text())
    out = {}
    for r in doc.get("results", []):
        if r["metric"] in ("acc", "bits_per_byte") and not r["task"].startswith("blimp_") or r["task"] == "blimp":
            out[f"{r['task']} {r['metric']}"] = r["value"]
    return out


def _runs_table(root: Path) -> tuple[str, list[Path]]:

    runs = sorted((d for d in find_run_dirs(root) if RunDir(d).summary.exists()), key=lambda p: p.name)
    rows, evals_cols = [], []
    per_run = {}
    for run in runs:
        s = json.loads(RunDir(run).summary.read_text())
        ev = _evals(run)
        per_run[run] = (s, ev)
        evals_cols += [k for k in ev if k not in evals_cols]
    headers = [
        "run",
        "status",
        "params",
        "non-emb params",
        "tokens",
        "epochs",
        "FLOPs",
        "batch",
        "lr",
        "val loss",
        "val bpb",
        *evals_cols,
    ]
    for run in runs:
        s, ev = per_run[run]
        rows.append(
            [
                run.name,
                s.get("status"),
                s.get("params"),
                s.get("non_embedding_params"),
                s.get("tokens"),
                s.get("epochs"),
                s.get("flops"),
                s.get("batch_tokens"),
                s.get("lr"),
                s.get("final_val_loss"),
                s.get("final_val_bpb"),
                *[ev.get(k) for k in evals_cols],
            ]
        )
    return _table(headers, rows), runs


def _fit_section(path: Path, title: str) -> str:
    from scaling.fits.record import FitRecord  # deferred: imports numpy/pydantic (a fast scalelab --help)

    if not path.exists():
        return f"### {title}\n\n(not fitted: {path.name} missing)\n"

    rec = FitRecord.load(path)
    text = f"### {title}\n\n```\n{rec.summary()}\n```\n"
    png = path.with_suffix(".png")
    if png.exists():
        text += f"\n![{title}](fits/{png.name})\n"
    return text


def _reach(plan: PlanRecord, a3: Path) -> str:
    """How far the plan extrapolates: beyond the largest IsoFLOP budget and beyond the largest run
    (the sweep's anchors reach further than its budgets)."""
    from scaling.fits.record import FitRecord  # deferred: imports numpy (a fast scalelab --help)

    factor = plan.get("extrapolation_factor") or 1.0
    rng = (FitRecord.load(a3).data_range or {}) if a3.exists() else {}
    if not rng.get("C_budgets"):
        return f"{factor:.3g}x the largest fitted budget"
    return (
        f"{plan['compute'] / rng['C_budgets'][1]:.3g}x the largest IsoFLOP budget, "
        f"{factor:.3g}x the largest fitted run (an anchor)"
    )


def _transfer_section(t: dict | None) -> list[str]:
    """The μP lr sweep (transfer.enabled): its runs, the parabola's choice and the keys transferred."""
    if not t:
        return []
    how = (
        "the vertex of a parabola in log lr through the final validation losses at lrs "
        + ", ".join(f"{x:.3g}" for x in t["fit_lrs"])
        + " (the best and its neighbours)"
        if t["method"] == "vertex"
        else "the best grid point"
    )
    rows = [[r["run"], r["lr"], r["status"], r["val_loss"]] for r in t["runs"]]
    return [
        "\n## Tune once, transfer: the lr sweep under μP\n",
        "Every IsoFLOP run, anchor and the plan's run trained under `"
        + " ".join(f"{k}={v}" for k, v in t["mup"].items())
        + f" optim.lr={t['lr']:.4g}`: the lr is {how} of "
        f"`{t['model']}`'s sweep (best grid point {t['best_lr']:.4g}, loss {t['best_loss']:.4f}).\n",
        *([f"**Warning:** {t['warning']}.\n"] if t.get("warning") else []),
        _table(["run", "lr", "status", "val loss"], rows),
        "\n![lr sweep under μP](transfer/lr-sweep.png)\n",
    ]


def write_report(
    out: Path,
    iso_runs: Path,
    bslr_runs: Path,
    fits: Path,
    plan_run: Path,
    comparison: dict,
    timings: dict,
    cumulative: dict | None = None,
    study: dict | None = None,
    cpu: dict | None = None,
    batch_lr_skipped: str | None = None,
    transfer: dict | None = None,
) -> Path:
    from scaling.planning.report import format_plan  # deferred: imports scipy

    iso_table, _ = _runs_table(iso_runs)
    bslr_table, _ = _runs_table(bslr_runs)
    plan_table, _ = _runs_table(plan_run.parent)
    plan = PlanRecord.load(out / "plan" / "plan.json")
    c = comparison
    conv = c.get("conventions") or plan.get("conventions") or {}
    parts = [
        "# scalelab quickstart: a scaling study on the bundled corpus\n",
        "Every number below was measured by this run; rerun `make quickstart` to reproduce it.\n",
        "## Wall time\n",
        "Seconds per step in this invocation, and summed over every invocation that built this folder "
        "(a rerun reuses finished work).\n",
        _table(
            ["step", "this invocation", "all invocations", "CPU seconds (all invocations)"],
            [[k, v, (cumulative or timings).get(k, v), (cpu or {}).get(k)] for k, v in timings.items()],
        ),
        *([f"\n{study['line']}.\n"] if study else []),
        "\n## The honest test: predicted vs measured loss\n",
        f"The plan for {plan['compute']:.3g} FLOPs ({conv.get('compute', '?')}; "
        f"{_reach(plan, fits / 'chinchilla-a3.json')}) "
        f"was trained as `{Path(c['run']).name}` (N = {c['N']:.4g} "
        f"{c.get('n_kind', '')} parameters, {c.get('params', 0):.4g} in all; "
        f"D = {c['D']:.4g} tokens"
        + (f", {c['epochs']:.2f} epochs of the training data" if c.get("epochs") else "")
        + ").\n",
        _table(
            ["", "validation loss"],
            [
                ["predicted by approach 3 (point)", c["predicted"]],
                [f"95% {c.get('interval_kind', 'interval')}", f"{c['interval'][0]:.4f} – {c['interval'][1]:.4f}"],
                *(
                    [
                        [
                            "95% parameter-only interval",
                            f"{c['parameter_interval'][0]:.4f} – {c['parameter_interval'][1]:.4f}",
                        ]
                    ]
                    if c.get("parameter_interval")
                    else []
                ),
                ["measured", c["measured"]],
                [
                    "relative error",
                    f"{c['rel_error']:+.2%}"
                    + (" (inside the interval)" if c.get("inside") else " (outside the interval)"),
                ],
            ],
        ),
        "\n## Plan\n",
        f"```\n{format_plan(plan)}\n```\n",
        "## Fits\n",
        _fit_section(fits / "chinchilla-a3.json", "Chinchilla approach 3 (parametric, Huber on log loss)"),
        _fit_section(fits / "chinchilla-a2.json", "Chinchilla approach 2 (IsoFLOP parabolas)"),
        _fit_section(fits / "batch-lr.json", "Batch size and learning rate")
        if not batch_lr_skipped
        else f"### Batch size and learning rate\n\n(skipped: {batch_lr_skipped})\n",
        *_transfer_section(transfer),
        "## IsoFLOP sweep\n",
        *(
            [
                f"The (N, D, loss) points come from {study['source']}; "
                "the plan's run was trained with the same schedule.\n"
            ]
            if study
            else []
        ),
        iso_table,
        "\n## Batch-size x learning-rate sweep\n",
        bslr_table if not batch_lr_skipped else f"Skipped: {batch_lr_skipped}.\n",
        "\n## The plan's run\n",
        plan_table,
        "\n## Dashboard\n",
        f"```\nscalelab dashboard --runs {out / 'runs'} --fits {fits}\n```\n",
        *next_sweep_section(out, fits, study),
    ]
    path = out / "report.md"
    path.write_text("\n".join(parts) + "\n")
    return path
