"""Per-task evaluation points of a run-directory tree: one row per (run, evaluated step, task).

The loss-to-accuracy chain (`fit task-loss`, `fit accuracy`) reads each finished run's
`evals/<step>.json` (written by `scalelab eval`; the JSON file is the contract, nothing of
evals/ is imported) beside the run's N and tokens from summary.json (`inputs.read_run_dirs`).
Task loss is the gold continuation's `gold_bpb` (OLMo's bits per byte; `--loss-metric bpb`),
`gold_nats` (nats per token; `nats`) or the run's validation loss (`val_loss`: the loss
`fit chinchilla` fits, at the run's final step only). Accuracy is `acc`, or `acc_norm` where
the task reports it (`--acc-metric acc_norm`). D is the tokens seen at the evaluated step.
"""

from __future__ import annotations

import json
from pathlib import Path

from rundir.layout import EVALS
from scaling.core.errors import InputError
from scaling.data.inputs import read_run_dirs

LOSS_METRICS = {"bpb": "gold_bpb", "nats": "gold_nats", "val_loss": "val_loss"}
ACC_METRICS = ("acc", "acc_norm")
STEPS = ("last", "all")
RUN_COLUMNS = (
    "run",
    "sweep",
    "path",
    "N",
    "batch_tokens",
    "lr",
    "params",
    "non_embedding_params",
    "active_params",
    "flops_per_token",
    "unique_tokens",
    "isoflop_compute",
    "budget",
)


def check_options(loss_metric: str, acc_metric: str = "acc", steps: str = "last") -> str:
    """Validate the reading options (exit 2 before any work); returns the loss metric's record name."""
    if loss_metric not in LOSS_METRICS:
        raise InputError(f"--loss-metric must be one of {', '.join(LOSS_METRICS)} (got {loss_metric!r})")
    if acc_metric not in ACC_METRICS:
        raise InputError(f"--acc-metric must be one of {', '.join(ACC_METRICS)} (got {acc_metric!r})")
    if steps not in STEPS:
        raise InputError(f"--steps must be one of {', '.join(STEPS)} (got {steps!r})")
    if loss_metric == "val_loss" and steps != "last":
        raise InputError("--loss-metric val_loss is the run's final validation loss: it needs --steps last")
    return LOSS_METRICS[loss_metric]


def parse_tasks(text) -> list[str] | None:
    if text is None:
        return None
    names = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t and t.strip()]
    return names or None


def read_eval_points(
    root,
    *,
    n_kind: str = "total",
    steps: str = "last",
    loss_metric: str = "bpb",
    acc_metric: str = "acc",
    tasks: list[str] | None = None,
):
    """(DataFrame, warnings): columns task, step, D, loss, acc, acc_metric, chance, n_docs, final
    plus the run's N and per-run columns (RUN_COLUMNS, flops = flops_per_token x D, epochs)."""
    import pandas as pd  # deferred: pandas is slow to import

    metric = check_options(loss_metric, acc_metric, steps)
    runs, warnings = read_run_dirs(root, n_kind=n_kind)
    rows, no_evals, found = [], [], set()
    lacking: dict[str, int] = {}
    for run in runs.to_dict("records"):
        files = _eval_files(Path(run["path"]) if run.get("path") else Path(root) / run["run"])
        if not files:
            no_evals.append(run["run"])
            continue
        final_step = run.get("steps")
        chosen = files if steps == "all" else files[-1:]
        if steps == "last" and final_step and chosen[0][0] != int(final_step):
            warnings.append(
                f"run {run['run']}: last evaluated step {chosen[0][0]} is not its "
                f"final step {int(final_step)} (D = tokens at step {chosen[0][0]})"
            )
        for step, path in chosen:
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                warnings.append(f"run {run['run']}: {path.name} unreadable ({exc}); skipped")
                continue
            is_final = bool(final_step) and step == int(final_step)
            D = _num(doc.get("tokens")) or (run["D"] if is_final else None)
            if D is None:
                warnings.append(f"run {run['run']}: {path.name} states no tokens; skipped")
                continue
            for task, m in _by_task(doc).items():
                if metric in m or metric == "val_loss":
                    found.add(task)
                if tasks is not None and task not in tasks:
                    continue
                if metric == "val_loss":
                    loss = run["loss"] if is_final else None
                else:
                    loss = m.get(metric, {}).get("value")
                if loss is None:
                    if "acc" in m or "acc_norm" in m:
                        lacking[task] = lacking.get(task, 0) + 1
                    continue
                acc_key = acc_metric if acc_metric in m else "acc"
                gold = m.get("gold_bpb") or m.get("gold_nats") or {}
                row = {k: run.get(k) for k in RUN_COLUMNS}
                row.update(
                    task=task,
                    step=step,
                    D=float(D),
                    final=is_final,
                    loss=float(loss),
                    acc=(m.get(acc_key) or {}).get("value"),
                    acc_metric=acc_key if acc_key in m else None,
                    chance=gold.get("chance"),
                    n_docs=(m.get(acc_key) or gold).get("n"),
                )
                row["flops"] = run["flops_per_token"] * D if run.get("flops_per_token") else None
                row["epochs"] = D / run["unique_tokens"] if run.get("unique_tokens") else None
                row["steps"] = step
                rows.append(row)
    if no_evals:
        warnings.append(
            f"{len(no_evals)} finished run(s) have no evals/<step>.json (evaluate them with `scalelab sweep eval` or "
            f"`scalelab eval`): {', '.join(no_evals[:5])}{' ...' if len(no_evals) > 5 else ''}"
        )
    for task, n in sorted(lacking.items()):
        warnings.append(
            f"task {task}: {n} evaluation(s) have no {metric} (evaluated before gold losses were recorded? "
            "re-evaluate with `scalelab eval` or `scalelab sweep eval --force`)"
        )
    missing = [t for t in tasks or [] if t not in found]
    if missing and found:
        raise InputError(
            f"--tasks: no evaluation of {', '.join(missing)} with a "
            f"{metric} under {root} (tasks found: {', '.join(sorted(found))})"
        )
    if not rows:
        raise InputError(
            f"{root}: no evaluated runs with a task {metric} found" + (f"; {'; '.join(warnings)}" if warnings else "")
        )
    df = pd.DataFrame(rows)
    for col in (
        "N",
        "D",
        "loss",
        "acc",
        "chance",
        "flops",
        "epochs",
        "params",
        "non_embedding_params",
        "active_params",
        "flops_per_token",
        "unique_tokens",
        "batch_tokens",
        "lr",
        "budget",
    ):
        if col in df.columns:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df, warnings


def _eval_files(run_dir: Path) -> list[tuple[int, Path]]:
    d = run_dir / EVALS
    if not d.is_dir():
        return []
    return sorted((int(p.stem), p) for p in d.glob("*.json") if p.stem.isdigit())


def _by_task(doc: dict) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for r in doc.get("results") or []:
        if isinstance(r, dict) and r.get("task") and r.get("metric") and _num(r.get("value")) is not None:
            out.setdefault(r["task"], {})[r["metric"]] = r
    return out


def _num(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f and abs(f) != float("inf") else None
