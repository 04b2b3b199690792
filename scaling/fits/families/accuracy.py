"""`scalelab fit accuracy`: task accuracy against task loss, a sigmoid per task (OLMo ladder step 2;
scaling.fits.accuracy)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scaling.fits import flags as F
from scaling.fits.family import Flag, LawFamily, options_from, register


@dataclass(frozen=True)
class AccuracyOptions:
    """fit_accuracy's choices (scaling.fits.accuracy: what each means)."""

    bootstrap: int = 0
    seed: int = 0
    ci: float = 0.95
    chance: float | None = None
    loss_metric: str = "bpb"
    acc_metric: str = "acc"
    steps: str = "last"
    tasks: str | None = None


def fit(args, data):
    from scaling.data.columns import parse_columns  # deferred: with the fit
    from scaling.fits.accuracy import ROLES, fit_accuracy  # deferred: numpy, scipy, pandas (a fast --help)

    return fit_accuracy(data, columns=parse_columns(args.col, ROLES), **asdict(options_from(AccuracyOptions, args)))


def summary(rec) -> str:
    from scaling.fits.accuracy import summary as text  # deferred: numpy, scipy, pandas (a fast --help)

    return text(rec)


def predict(rec, data, columns, ci: float, seed: int):
    from scaling.fits.accuracy_prediction import predict_accuracy_rows  # deferred: numpy (a fast --help)

    return predict_accuracy_rows(rec, data, columns, ci, seed)


FAMILY = register(
    LawFamily(
        name="accuracy",
        help="task accuracy vs task loss: Acc(L) = a / (1 + exp(-k (L - L0))) + b (OLMo ladder step 2), per task",
        flags=(
            F.data_flag(
                "a run-directory tree (each run's evals/<step>.json) or a CSV/Parquet table with a loss "
                "and an accuracy column (and optionally a task column)"
            ),
            F.col_flag("tables: map a column to a role (loss, acc, task); repeatable"),
            *F.eval_reading(accuracy=True),
            Flag(
                "--chance",
                type=float,
                metavar="P",
                help="chance accuracy of every task, e.g. 0.25 for 4 choices (default: each task's own, "
                "1 / number of choices, from its evaluations): warns when every accuracy sits there",
            ),
            F.out_flag(),
            F.bootstrap_flag(),
            Flag("--seed", type=int, default=0),
            Flag("--ci", type=float, default=0.95),
            F.json_flag(),
        ),
        options=AccuracyOptions,
        fit=fit,
        predict=predict,
        summary=summary,
    )
)
