"""`scalelab fit task-loss`: each task's loss against N and D (OLMo ladder step 1; scaling.fits.task_loss)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scaling.fits import flags as F
from scaling.fits.family import Flag, LawFamily, options_from, register
from scaling.fits.options import FitOptions


@dataclass(frozen=True)
class TaskLossOptions(FitOptions):
    """fit_task_loss's choices (scaling.fits.task_loss: what each means)."""

    tasks: str | None = None
    loss_metric: str = "bpb"
    steps: str = "last"
    n_kind: str = "total"
    compute_kind: str | None = None
    holdout_fraction: float = 0.1


def fit(args, data):
    from scaling.data import inputs  # deferred: numpy (a fast --help)
    from scaling.data.columns import parse_columns  # deferred: with the fit
    from scaling.fits.task_loss import fit_task_loss  # deferred: numpy, scipy, pandas (a fast --help)

    columns = parse_columns(args.col, (*inputs.ROLES, "task"))
    return fit_task_loss(data, columns=columns, **asdict(options_from(TaskLossOptions, args)))


def summary(rec) -> str:
    from scaling.fits.task_loss import summary as text  # deferred: numpy, scipy, pandas (a fast --help)

    return text(rec)


def predict(rec, data, columns, ci: float, seed: int):
    from scaling.fits.loss_prediction import predict_task_loss_rows  # deferred: numpy (a fast --help)

    return predict_task_loss_rows(rec, data, columns, ci, seed)


FAMILY = register(
    LawFamily(
        name="task-loss",
        help="per-task loss vs N, D: L_task = E + A/N^alpha + B/D^beta (OLMo ladder step 1), per task",
        flags=(
            *F.common(plot=False, task=True),
            *F.eval_reading(accuracy=False),
            Flag(
                "--holdout",
                choices=["largest"],
                help="fit each task on the smaller-compute runs, report the task-loss error on the largest",
            ),
            Flag(
                "--holdout-fraction",
                type=float,
                default=0.1,
                help="without IsoFLOP budgets: fraction of runs (largest compute) held out (default 0.1)",
            ),
            F.compute_kind(),
        ),
        options=TaskLossOptions,
        fit=fit,
        predict=predict,
        summary=summary,
    )
)
