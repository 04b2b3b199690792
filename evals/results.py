"""Evaluation results: flat records in `<run>/evals/<step>.json` and `eval/...` in W&B.

The file is the contract with the run registry, the dashboard and loss-to-accuracy fits: one
record per (task, metric) with value, stderr and the number of documents; multiple-choice and
loglikelihood tasks also get `gold_bpb` and `gold_nats` (the gold continuation's loss, with the
task's `chance` accuracy: evals.gold). Evaluating the same
step again (another suite, more tasks) merges into the file; a newer record of the same
(task, metric) replaces the older one. Failed tasks are listed, never silently dropped.
"""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime
from pathlib import Path

from rundir.files import atomic_write_json, read_json, read_yaml
from rundir.layout import RunDir

SCHEMA_VERSION = 1


def records_from_lm_eval(out: dict, suite: str, limit) -> list[dict]:
    """Flatten `lm_eval.simple_evaluate` output to {task, metric, value, stderr, n, ...} records."""
    recs = []
    n_samples = out.get("n-samples", {})
    n_shot = out.get("n-shot", {})
    for task, metrics in out.get("results", {}).items():
        n = n_samples.get(task, {}).get("effective")
        for key, value in metrics.items():
            if "," not in key or "_stderr," in key or not isinstance(value, (int, float)):
                continue
            metric, _, filt = key.partition(",")
            stderr = metrics.get(f"{metric}_stderr,{filt}")
            recs.append(
                {
                    "task": task,
                    "metric": metric,
                    "value": _num(value),
                    "stderr": _num(stderr),
                    "n": n,
                    "num_fewshot": n_shot.get(task),
                    "limit": limit,
                    "suite": suite,
                    "status": "ok",
                }
            )
    return recs


def _num(v):
    if v is None or isinstance(v, str):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def aggregate_blimp(records: list[dict], suite: str) -> list[dict]:
    """Document-weighted means over the BLiMP tasks present: `blimp` / acc, and the gold
    continuation's loss (`gold_bpb`, `gold_nats`; evals.gold) over the same tasks."""
    out = []
    for metric in ("acc", "gold_bpb", "gold_nats"):
        b = [r for r in records if r["task"].startswith("blimp_") and r["metric"] == metric and r["value"] is not None]
        if not b:
            continue
        n = sum(r["n"] or 0 for r in b)
        value = sum(r["value"] * (r["n"] or 0) for r in b) / n if n else sum(r["value"] for r in b) / len(b)
        rec = {
            "task": "blimp",
            "metric": metric,
            "value": value,
            "stderr": None,
            "n": n,
            "num_fewshot": 0,
            "limit": None,
            "suite": suite,
            "status": "ok",
            "aggregate_of": len(b),
        }
        if metric != "acc":
            rec.update(chance=0.5, unit=b[0].get("unit"))
        out.append(rec)
    return out


def write_results(run_dir: Path, step: int, records: list[dict], failed: list[dict], meta: dict) -> Path:
    """Merge into `<run_dir>/evals/<step>.json` (atomic) and return its path."""
    path = RunDir(run_dir).eval_file(step)
    old = read_json(path) or {}
    keep = {(r["task"], r["metric"]): r for r in old.get("results", [])}
    done_tasks = {r["task"] for r in records}
    for r in records:
        keep[(r["task"], r["metric"])] = r
    fails = {f["task"]: f for f in old.get("failed", []) if f["task"] not in done_tasks}
    for f in failed:
        fails[f["task"]] = f
    suites = list(dict.fromkeys(old.get("suites", []) + [meta.get("suite")]))
    doc = {
        "schema": SCHEMA_VERSION,
        "step": step,
        "tokens": meta.get("tokens"),
        "checkpoint": meta.get("checkpoint"),
        "suites": [s for s in suites if s],
        "lm_eval_version": meta.get("lm_eval_version"),
        "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "eval_s": round(float(old.get("eval_s") or 0) + float(meta.get("eval_s") or 0), 3),
        "config": meta.get("config", {}),
        "results": sorted(keep.values(), key=lambda r: (r["task"], r["metric"])),
        "failed": list(fails.values()),
    }
    atomic_write_json(path, doc)
    return path


def wandb_metrics(records: list[dict], failed: list[dict]) -> dict:
    """`eval/<task>/<metric>` (and `.../stderr`) plus `eval/<task>/failed` = 1 for failures."""
    out = {}
    for r in records:
        if r["value"] is not None:
            out[f"eval/{r['task']}/{r['metric']}"] = r["value"]
        if r.get("stderr") is not None:
            out[f"eval/{r['task']}/{r['metric']}_stderr"] = r["stderr"]
    for f in failed:
        out[f"eval/{f['task']}/failed"] = 1
    return out


def log_to_wandb(
    run_dir: Path, step: int, tokens: int | None, metrics: dict, eval_s: float, mode: str | None = None
) -> bool:
    """Log into the run's own W&B run (resumed by the id in `<run>/wandb_id`).

    Uses `eval/step` as the x-axis (`define_metric`), so evaluating an old checkpoint after
    training never trips W&B's monotonic-step rule. If a W&B run is already active in this
    process (in-loop evaluation) and is this run's own, logs into it; another active run is left alone.
    Returns False when W&B is disabled or unusable.
    """
    os.environ.setdefault("WANDB_SILENT", "true")
    try:
        import wandb  # deferred: imports wandb
    except ImportError:
        return False
    payload = {**metrics, "eval/step": step, "eval/tokens": tokens, "eval/time_s": eval_s}
    run_dir = Path(run_dir)
    id_file = RunDir(run_dir).wandb_id
    own_id = id_file.read_text().strip() if id_file.exists() else None
    # in-loop: the trainer's run, same step as its latest record. Only this run's own W&B run: another one
    # active in the process (a notebook's, one a failed run left) must not receive this run's results
    if wandb.run is not None and wandb.run.id == own_id:
        _define(wandb.run)
        if wandb.run.step <= step:
            wandb.run.log(payload, step=step)
        else:
            wandb.run.log(payload)
        return True
    try:
        wcfg = (read_yaml(RunDir(run_dir).config) or {}).get("wandb") or {}
    except FileNotFoundError:
        wcfg = {}
    mode = mode or wcfg.get("mode", "offline")
    if mode == "disabled" or own_id is None:
        return False
    run = wandb.init(
        mode=mode,
        project=wcfg.get("project", "scalelab"),
        entity=wcfg.get("entity"),
        group=wcfg.get("group"),
        name=wcfg.get("name") or run_dir.name,
        dir=str(run_dir),
        id=own_id,
        resume="allow",
        settings=wandb.Settings(
            console="off",
            x_disable_stats=True,
            x_save_requirements=False,
            disable_git=True,
            reinit="create_new",  # beside another active run, not returning it
        ),
    )
    try:
        _define(run)
        run.log(payload)
    finally:
        run.finish()
    return True


def _define(run) -> None:
    run.define_metric("eval/step")
    run.define_metric("eval/*", step_metric="eval/step")
