"""The chain N, D -> task loss -> accuracy (OLMo's ladder, Bhagia et al. 2024: step 1 fed into step 2).

`predict_chain(acc_rec, N, D, task_loss=TL)` predicts each task's accuracy for a run with N
parameters trained on D tokens: the task-loss law (`fit task-loss`) gives the task's loss, the
sigmoid (`fit accuracy`) its accuracy. When the accuracy fit's loss is the validation loss
(`--loss-metric val_loss`), the chinchilla fit (`fit chinchilla`) gives that loss instead.

Interval (a prediction interval for one new run's measured accuracy): every draw of the loss
(each bootstrap law of step 1 at N, D times a resampled log residual of its fit, as for `plan`'s
loss) goes through a bootstrap sigmoid of step 2 (paired in turn) plus a resampled residual of the
accuracy fit (the evaluation's own sampling noise and the runs' scatter; scaled by sqrt(n / (n - 4)),
since the residuals of a 4-parameter least-squares fit to n points understate a new point's
scatter), clipped to [0, 1]. The `parameter_interval` leaves out both residual scatters (the
laws' uncertainty alone).
"""

from __future__ import annotations

from scaling.core.errors import InputError
from scaling.fits.accuracy_prediction import through_sigmoid
from scaling.fits.record import FitRecord
from scaling.fits.task_loss import task_record
from scaling.laws.prediction import loss_draws
from scaling.planning.record import PlanRecord
from scaling.planning.run_model import run_label

INTERVAL_KIND = (
    "prediction interval: step-1 loss draws (bootstrap laws x log residuals) through bootstrap sigmoids "
    "+ the accuracy fit's residuals"
)


def loss_metric(acc_rec) -> str | None:
    return (acc_rec.get("settings") or {}).get("loss_metric")


def _per_task(acc_rec) -> dict:
    return acc_rec.get("tasks") or {None: acc_rec}


def check(acc_rec, task_loss=None, chinchilla=None) -> str:
    """Which loss feeds the sigmoid, or InputError (exit 2) when the fits do not chain."""
    if acc_rec.get("law") != "accuracy":
        raise InputError(f"--accuracy takes a `scalelab fit accuracy` record (got law {acc_rec.get('law')!r})")
    metric = loss_metric(acc_rec)
    if task_loss is not None:
        if task_loss.get("law") != "task-loss":
            raise InputError(f"--task-loss takes a `scalelab fit task-loss` record (got law {task_loss.get('law')!r})")
        tl_metric = (task_loss.get("settings") or {}).get("loss_metric")
        if metric == "val_loss":
            raise InputError(
                "the accuracy fit maps the validation loss to accuracy: "
                "it chains from the chinchilla fit, not --task-loss"
            )
        if metric and tl_metric and metric != tl_metric:
            raise InputError(
                f"the accuracy fit's loss is {metric} but the task-loss fit "
                f"predicts {tl_metric}: fit both on the same --loss-metric"
            )
        return "task-loss"
    if metric == "val_loss":
        if chinchilla is None or chinchilla.get("approach") != 3:
            raise InputError(
                "the accuracy fit maps the validation loss to accuracy: "
                "it needs an approach-3 chinchilla fit to predict that loss"
            )
        return "validation-loss"
    raise InputError(
        f"the accuracy fit maps {metric or 'a task loss'} to accuracy: "
        "give --task-loss TL.json (from `scalelab fit task-loss`) "
        "to predict the planned run's task loss (or fit accuracy "
        "with --loss-metric val_loss to chain from the plan's loss)"
    )


def predict_chain(
    acc_rec,
    N: float,
    D: float,
    *,
    task_loss=None,
    chinchilla=None,
    N_task_loss: float | None = None,
    U: float | None = None,
    ci: float = 0.95,
    seed: int = 0,
) -> dict:
    """{basis, tasks: {task: {task_loss, task_loss_interval, acc, interval, parameter_interval, chance,
    loss_range}}, warnings}. N is in the chinchilla fit's kind; `N_task_loss` (default N) in the task-loss
    fit's; U (unique tokens) reaches a data-constrained chinchilla law's validation loss."""
    basis = check(acc_rec, task_loss, chinchilla)
    metric = loss_metric(acc_rec) or (task_loss.get("settings") or {}).get("loss_metric")
    warnings, tasks = [], {}
    shared = loss_draws(FitRecord(chinchilla), N, D, seed, U) if basis == "validation-loss" else None
    for name, r in _per_task(acc_rec).items():
        label = name or "task"
        if basis == "task-loss":
            if name is None and len(task_loss.get("tasks") or {}) != 1:
                raise InputError("the accuracy fit names no task: its task-loss fit must hold exactly one task")
            key = name if name is not None else next(iter(task_loss["tasks"]))
            if key not in (task_loss.get("tasks") or {}):
                warnings.append(
                    f"accuracy chain: task {label} has no task-loss law in the --task-loss fit: no prediction"
                )
                continue
            ld = loss_draws(task_record(task_loss, key), N_task_loss or N, D, seed)
        elif shared is not None:  # basis validation-loss: one law's draws for every task
            ld = shared
        else:
            raise InputError(f"accuracy chain: unknown basis {basis!r}")
        tasks[label] = through_sigmoid(r, ld, ci, seed)
        lo_hi = r.get("loss_range")
        if lo_hi and not lo_hi[0] <= ld["point"] <= lo_hi[1]:
            warnings.append(
                f"accuracy chain: task {label}'s predicted loss {ld['point']:.4g} "
                "lies outside the losses its sigmoid was fitted on "
                f"({lo_hi[0]:.4g}-{lo_hi[1]:.4g}): an extrapolation of the accuracy fit"
            )
    frm = (
        "the task-loss fit at the run's N, D (OLMo step 1)"
        if basis == "task-loss"
        else "the chinchilla fit's predicted validation loss at the run's N, D (the accuracy fit's loss is val_loss)"
    )
    return {
        "basis": {
            "loss_metric": metric,
            "loss_from": frm,
            "N": float(N),
            "D": float(D),
            "ci": ci,
            "interval_kind": INTERVAL_KIND,
        },
        "tasks": tasks,
        "warnings": warnings,
    }


def plan_block(plan: PlanRecord, acc_rec, task_loss=None, chinchilla=None, ci: float = 0.95) -> dict:
    """The plan's `accuracy` section and warnings for the run it trains (the inference-aware run
    when there is one, else the chosen preset, else N_opt, D_opt)."""
    run = (plan.get("inference") or {}).get("run") or plan.get("run")
    if run:
        N, D, where = run["N"], run["tokens"], f"the planned run ({run_label(run)})"
    else:
        N, D, where = plan["N_opt"], plan["D_opt"], "the continuous optimum N_opt, D_opt (no preset chosen)"
    n_tl = None
    if task_loss is not None:
        kind = (task_loss.get("conventions") or {}).get("n_kind") or task_loss.get("n_kind") or "total"
        if run and kind != run.get("n_kind"):
            n_tl = run.get("non_embedding_params" if kind == "non_embedding" else "params")
            if n_tl is None:
                raise InputError(
                    f"the task-loss fit counts N as {kind} parameters and the planned run states no such count: "
                    f"refit it with --n-kind {run.get('n_kind')}"
                )
        elif not run and kind != plan.get("n_kind"):
            raise InputError(
                f"the task-loss fit counts N as {kind} parameters, the plan "
                f"as {plan.get('n_kind')}: refit one with the other's --n-kind"
            )
    U = ((chinchilla or {}).get("data") or {}).get("unique_tokens")  # as the plan's own loss (data-constrained laws)
    out = predict_chain(acc_rec, N, D, task_loss=task_loss, chinchilla=chinchilla, N_task_loss=n_tl, U=U, ci=ci)
    out["basis"]["run"] = where
    return out


def format_accuracy(block: dict, ci: float = 0.95) -> list[str]:
    b = block["basis"]
    lines = [f"accuracy ({b['run']}; loss = {b['loss_metric']} from {b['loss_from']}; {ci:.0%} prediction intervals):"]
    for t, r in block["tasks"].items():
        iv, liv = r.get("interval"), r.get("task_loss_interval")
        ch = f", chance {r['chance']:.3g}" if r.get("chance") is not None else ""
        lines.append(
            f"  {t}: acc {r['acc']:.3f}"
            + (f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv else "")
            + f"  at loss {r['task_loss']:.4g}"
            + (f" [{liv[0]:.4g}, {liv[1]:.4g}]" if liv else "")
            + ch
        )
    return lines
