"""`scalelab fit lr-annealing`: the learning-rate annealing law over whole loss curves (Tissue et al.
2024; scaling.fits.lr_annealing.fit). A law family like those in scaling/fits/families/, kept beside its fit
because lr_annealing sits above fits in scaling's layers."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass

from scaling.fits import flags as F
from scaling.fits.family import Flag, LawFamily, options_from, register


@dataclass(frozen=True)
class LrAnnealingOptions:
    """fit_lr_annealing's choices (scaling.fits.lr_annealing.fit: what each means); lam: a number or 'auto'."""

    metric: str = "loss"
    lam: float | str = 0.999
    warmup: str = "peak"
    skip_fraction: float = 0.0
    bootstrap: int = 0
    seed: int = 0
    ci: float = 0.95
    holdout: str | None = None
    holdout_fraction: float = 0.2


def _lambda(text: str):
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number or auto: {text!r}") from None


def fit(args, data):
    from scaling.data.columns import parse_columns  # deferred: with the fit
    from scaling.fits.lr_annealing.curves import TABLE_ROLES  # deferred: numpy (a fast --help)
    from scaling.fits.lr_annealing.fit import fit_lr_annealing  # deferred: numpy (a fast --help)

    columns = parse_columns(args.col, TABLE_ROLES)
    return fit_lr_annealing(data, **asdict(options_from(LrAnnealingOptions, args)), columns=columns)


def predict(rec, data, columns, ci: float, seed: int):
    """The law predicts loss curves of a schedule, which `predict-curve` draws; not losses at points."""
    from scaling.core.errors import InputError  # deferred: with the prediction

    raise InputError(
        "an lr-annealing fit predicts loss curves of a schedule: use `scalelab predict-curve FIT.json CONFIG`"
    )


FAMILY = register(
    LawFamily(
        name="lr-annealing",
        help="loss curves vs lr schedule: L(s) = L0 + A*S1^-alpha - C*S2 (Tissue et al. 2024)",
        description="Fit the learning-rate annealing law to whole loss curves; the record predicts the curve of any "
        "schedule (scalelab predict-curve).",
        flags=(
            F.data_flag("run-directory tree, or a CSV/Parquet table with columns run, step, lr, loss"),
            Flag(
                "--metric",
                choices=["loss", "val_loss"],
                default="loss",
                help="run directories: the metrics.jsonl curve (default loss: the training loss, compared over its "
                "log window)",
            ),
            Flag(
                "--lambda",
                dest="lam",
                type=_lambda,
                default=0.999,
                metavar="L",
                help="decay factor of the annealing momentum (default 0.999, "
                "the paper's), or auto: the grid value with the best fit",
            ),
            Flag(
                "--warmup",
                choices=["peak", "actual"],
                default="peak",
                help="peak (default): warmup steps count at the peak lr (the paper's section 3.4); "
                "actual: as scheduled",
            ),
            Flag(
                "--skip-fraction",
                type=float,
                default=0.0,
                metavar="F",
                help="leave out points before this fraction of each curve's steps (default 0: every point, as the "
                "authors' fitting script)",
            ),
            Flag(
                "--holdout",
                choices=["last-run", "tail"],
                help="last-run: fit on the other curves, predict the last "
                "(last run directory by path / last run in the table); "
                "tail: fit on each curve's early steps, predict its last --holdout-fraction",
            ),
            Flag(
                "--holdout-fraction",
                type=float,
                default=0.2,
                metavar="F",
                help="tail holdout: fraction of each curve's steps held out (default 0.2)",
            ),
            F.col_flag("table: map a column to a role (run, step, lr, loss); repeatable"),
            F.out_flag(),
            F.bootstrap_flag("bootstrap resamples of whole curves for intervals (0: none)"),
            Flag("--seed", type=int, default=0),
            Flag("--ci", type=float, default=0.95),
            F.json_flag(),
        ),
        options=LrAnnealingOptions,
        fit=fit,
        predict=predict,
    )
)
