"""Task loss from (N, D): the Chinchilla form fitted to each task's loss (OLMo's ladder, Bhagia et
al. 2024, step 1): L_task(N, D) = E + A / N^alpha + B / D^beta (`scalelab fit task-loss DATA`).

OLMo fits its step 1 with the summed Huber (delta 1e-3) of log residuals, as `fit chinchilla`'s
approach 3 does, so each task's law *is* an approach-3 fit (`fit_chinchilla`, through the shared
pipeline: validation, bootstrap over runs, holdout, record) of that task's loss. The record
(`law: task-loss`) holds one such chinchilla record per task under `tasks`, which is what `plan
--task-loss` evaluates at the planned run's N, D (`scaling.laws.prediction.loss_draws`).

DATA: a run-directory tree (N from summary.json of `--n-kind`, D = tokens at the evaluated step,
loss = the task's `gold_bpb`, or `gold_nats` with `loss_metric="nats"`; scaling.data.eval_points) or a
table with N, D, loss and a task column (`--col task=NAME`; without one the table is one task).
A task with too few evaluated runs for its own fit is left out with a warning.
"""

from __future__ import annotations

from pathlib import Path

from scaling.core.errors import FitError, InputError
from scaling.data import inputs
from scaling.data.eval_points import check_options, parse_tasks, read_eval_points
from scaling.data.table_files import read_table
from scaling.fits import pipeline
from scaling.fits.chinchilla.approaches import fit_chinchilla
from scaling.fits.record import FitRecord, data_sha256

FORM = "L_task(N, D) = E + A / N^alpha + B / D^beta (per task)"


def fit_task_loss(
    data,
    *,
    columns: dict[str, str] | None = None,
    tasks=None,
    loss_metric: str = "bpb",
    steps: str = "last",
    n_kind: str = "total",
    compute_kind: str | None = None,
    bootstrap: int = 0,
    seed: int = 0,
    ci: float = 0.95,
    holdout: str | None = None,
    holdout_fraction: float = 0.1,
):
    """Fit the task-loss law of every task in `data`; returns one FitRecord (`law: task-loss`)."""
    pipeline.FitOptions(bootstrap=bootstrap, seed=seed, ci=ci, holdout=holdout).check()
    if loss_metric == "val_loss":
        raise InputError("--loss-metric val_loss is the validation loss itself: fit it with `scalelab fit chinchilla`")
    metric = check_options(loss_metric, "acc", steps)
    tasks = parse_tasks(tasks)
    columns = dict(columns or {})
    if isinstance(data, (str, Path)) and Path(data).is_dir():
        df, warnings = read_eval_points(data, n_kind=n_kind, steps=steps, loss_metric=loss_metric, tasks=tasks)
        source, kind = str(data), "run directories"
    else:
        df, source, warnings = table_points(data, columns, tasks, n_kind)
        kind = "table"
    if steps == "all" and kind != "table":
        warnings.append(
            "--steps all: intermediate checkpoints of a decaying learning-rate schedule lie above the loss of a run "
            "trained to that D; the law is biased (fit final steps for plans)"
        )
    fits, skipped = {}, []
    for task, g in df.groupby("task", sort=True):
        g = g.drop(
            columns=[c for c in ("task", "acc", "acc_metric", "chance", "n_docs", "final", "step") if c in g.columns]
        )
        try:
            fits[str(task)] = fit_chinchilla(
                g.reset_index(drop=True),
                approach=3,
                bootstrap=bootstrap,
                seed=seed,
                ci=ci,
                holdout=holdout,
                holdout_fraction=holdout_fraction,
                n_kind=n_kind,
                compute_kind=compute_kind,
            )
        except (InputError, FitError) as exc:
            skipped.append(f"task {task} left out: {exc}")
    if not fits:
        raise InputError("no task could be fitted: " + "; ".join(skipped))
    warnings += skipped
    warnings += [f"{t}: {w}" for t, r in fits.items() for w in r["warnings"]]
    first = next(iter(fits.values()))
    single = first if len(fits) == 1 else None
    return pipeline.record(
        law="task-loss",
        approach=3,
        form=FORM,
        params=dict(single["params"]) if single else {},
        intervals=dict(single["intervals"]) if single else {},
        objective=float(sum(r["objective"] for r in fits.values())),
        n_points=int(sum(r["n_points"] for r in fits.values())),
        warnings=warnings,
        data_sha256=data_sha256(
            df.assign(task_code=df["task"].astype("category").cat.codes), ["N", "D", "loss", "task_code"]
        ),
        source=source,
        n_kind=first.get("n_kind"),
        conventions=first.get("conventions"),
        settings={
            "loss_metric": metric,
            "steps": steps if kind != "table" else None,
            "data": kind,
            "bootstrap": bootstrap,
            "seed": seed,
            "ci": ci,
            "holdout": holdout,
            "tasks": tasks,
            "columns": columns,
            "fit": "fit chinchilla approach 3 per task (summed Huber(1e-3) of log residuals; OLMo ladder step 1)",
        },
        tasks=dict(fits),
    )


def table_points(data, columns: dict[str, str], tasks, n_kind: str):
    """(long canonical DataFrame with a task column, source, warnings) from a table; `--col task=NAME`
    (also the dashboard's reader of a task-loss record's table)."""
    import pandas as pd  # deferred: pandas is slow to import

    columns = dict(columns)  # the caller's mapping (saved in the record) keeps its task column
    task_col = columns.pop("task", None)
    raw, source = (data.copy(), "DataFrame") if isinstance(data, pd.DataFrame) else (read_table(data), str(data))
    if task_col and task_col not in raw.columns:
        raise InputError(f"--col task={task_col}: no column '{task_col}' (columns: {', '.join(map(str, raw.columns))})")
    col = task_col or ("task" if "task" in raw.columns else None)
    if col is None:  # one task: named by --tasks NAME when given
        names = pd.Series([tasks[0] if tasks and len(tasks) == 1 else "task"] * len(raw), index=raw.index)
    else:
        names = raw.pop(col).astype(str)
        if tasks:
            missing = [t for t in tasks if t not in set(names)]
            if missing:
                raise InputError(
                    f"--tasks: {', '.join(missing)} not in the table's "
                    f"task column (tasks: {', '.join(sorted(set(names)))})"
                )
            raw, names = raw[names.isin(tasks)], names[names.isin(tasks)]
    ds = inputs.load(raw.reset_index(drop=True), columns, n_kind)
    inputs.validate(ds, ("N", "D", "loss"), min_points=1, law="task-loss")
    return ds.df.assign(task=names.to_numpy()), source, list(ds.warnings)


def task_record(rec, task: str):
    """The chinchilla FitRecord of one task of a task-loss record."""
    per = rec.get("tasks") or {}
    if task not in per:
        raise InputError(f"task {task!r} is not in this task-loss fit (tasks: {', '.join(per)})")
    return FitRecord(per[task])


def summary(rec) -> str:
    st = rec.get("settings") or {}
    conv = rec.get("conventions") or {}
    lines = [
        f"law: task-loss  {rec.get('form', FORM)}",
        f"loss = {st.get('loss_metric')}"
        + (f" ({st['steps']} evaluated step of each run)" if st.get("steps") else "")
        + f"; N = {conv.get('n_kind', rec.get('n_kind'))} parameters; {st.get('fit')}",
        f"points: {rec['n_points']} over {len(rec.get('tasks') or {})} task(s)",
    ]
    for name, r in (rec.get("tasks") or {}).items():
        p, iv = r["params"], r.get("intervals") or {}
        parts = [
            f"{k} = {p[k]:.4g}" + (f" [{iv[k][0]:.3g}, {iv[k][1]:.3g}]" if iv.get(k) and None not in iv[k] else "")
            for k in ("E", "A", "B", "alpha", "beta")
        ]
        lines.append(f"  task {name}: {', '.join(parts)}  ({r['n_points']} runs)")
        ho = r.get("holdout")
        if ho and ho.get("mean_abs_rel_error") is not None:
            lines.append(
                f"    holdout ({ho['n_points']} largest runs): loss mean |rel err| {ho['mean_abs_rel_error']:.3g}, "
                f"max {ho['max_abs_rel_error']:.3g}"
            )
    for w in rec.get("warnings", []):
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def loss_range(rec, task: str) -> list[float] | None:
    r = (rec.get("tasks") or {}).get(task) or {}
    lo = (r.get("data_range") or {}).get("loss")
    return [float(v) for v in lo] if lo else None
