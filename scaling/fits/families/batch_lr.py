"""`scalelab fit batch-lr`: the optimal lr and batch as power laws in C or in N, D (scaling.fits.batch_lr)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scaling.fits import flags as F
from scaling.fits.family import Flag, LawFamily, options_from, register
from scaling.fits.options import FitOptions


@dataclass(frozen=True)
class BatchLrOptions(FitOptions):
    """fit_batch_lr's choices (scaling.fits.batch_lr: what each means)."""

    form: str = "compute"
    near_optimal_tol: float = 0.0025
    optimum: str = "best"
    budget_tol: float = 0.05
    compute_kind: str | None = None


def fit(args, ds):
    kw = asdict(options_from(BatchLrOptions, args))
    if args.by is None:
        from scaling.fits.batch_lr import fit_batch_lr  # deferred: numpy (a fast --help)

        return fit_batch_lr(ds, **kw)
    from scaling.fits.by.compare import fit_batch_lr_by  # deferred: numpy, scipy, pandas (a fast --help)

    return fit_batch_lr_by(ds, by=args.by, **kw)


def predict(rec, data, columns, ci: float, seed: int):
    from scaling.fits.batch_lr_prediction import predict_batch_lr_rows  # deferred: numpy (a fast --help)

    return predict_batch_lr_rows(rec, data, columns, ci, seed)


FAMILY = register(
    LawFamily(
        name="batch-lr",
        help="optimal lr and batch size as power laws in C (DeepSeek) or N, D (Step Law)",
        flags=(
            *F.common(),
            Flag(
                "--form",
                choices=["compute", "nd"],
                default="compute",
                help="compute: lr, B ~ C^x; nd: lr ~ N^x D^y, B ~ D^z",
            ),
            Flag(
                "--near-optimal-tol",
                type=float,
                default=0.0025,
                help="keep runs with loss <= best * (1 + tol) (default 0.0025)",
            ),
            Flag(
                "--optimum",
                choices=["best", "quadratic"],
                default="best",
                help="locate each group's optimum by its best run or a quadratic in (log lr, log B)",
            ),
            Flag(
                "--budget-tol",
                type=float,
                default=0.05,
                help="compute form: runs within this relative compute form one group",
            ),
            Flag(
                "--holdout",
                choices=["largest"],
                help="fit on the other groups, report the error of lr_opt and B_opt on the largest-compute group",
            ),
            F.compute_kind(),
            *F.by(baseline=False),
        ),
        options=BatchLrOptions,
        check=F.by_problem,
        load=F.load_table,
        fit=fit,
        predict=predict,
        summary=F.loss_law_summary,
        plot=F.plot_table,
    )
)
