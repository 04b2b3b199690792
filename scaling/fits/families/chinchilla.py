"""`scalelab fit chinchilla`: the Chinchilla law family (approaches 1-3; the data-constrained law with
--law data-constrained; one law per value with --by), its flags generated from ChinchillaOptions."""

from __future__ import annotations

from scaling.fits import flags as F
from scaling.fits.chinchilla.options import FRONTIER_WEIGHTS, TERMS, ChinchillaOptions
from scaling.fits.family import Flag, LawFamily, options_from, register

FLAGS = (
    *F.common(),
    Flag(
        "--approach",
        type=int,
        default=3,
        choices=[1, 2, 3],
        help="1: lower envelope, 2: IsoFLOP parabolas, 3: parametric Huber fit (default)",
    ),
    Flag(
        "--drop-highest", type=int, default=0, metavar="K", help="drop the K highest-loss points first (Epoch drops 5)"
    ),
    Flag(
        "--holdout",
        choices=["largest"],
        help="fit on the smaller-compute runs, report the error on the largest: "
        "loss (approach 3) or N_opt at the held-out budget (approaches 1, 2)",
    ),
    Flag(
        "--holdout-fraction",
        type=float,
        default=0.1,
        help="without IsoFLOP budgets: fraction of runs (largest compute) held out (default 0.1)",
    ),
    Flag(
        "--grid",
        choices=["fast", "full"],
        default="fast",
        help="fast: L-BFGS-B from the best --top-k of the 4500-point grid; full: from all 4500",
    ),
    Flag("--top-k", type=int, default=32, help="starts run in the fast mode (default 32)"),
    Flag(
        "--budget-tol",
        type=float,
        default=0.15,
        help="approach 2: runs within this relative compute are one IsoFLOP budget",
    ),
    Flag(
        "--compute",
        dest="at_compute",
        type=F.positive_float,
        action="append",
        metavar="C",
        help="also report N_opt/D_opt/loss at this compute (repeatable)",
    ),
    Flag(
        "--curves",
        action="store_true",
        help="approach 1 on run directories: use every metrics.jsonl point of each run (training curves)",
    ),
    F.compute_kind(),
    Flag(
        "--max-embedding-fraction",
        type=float,
        default=None,
        metavar="F",
        help="leave out runs whose embeddings exceed this fraction "
        "of their parameters (tiny, embedding-dominated models)",
    ),
    Flag(
        "--objective",
        choices=["huber", "mle"],
        default="huber",
        help="approach 3: huber = sum of Huber(1e-3) log residuals (default); "
        "mle = Epoch's maximum likelihood (Huber-shaped density, free sigma)",
    ),
    Flag(
        "--law",
        dest="law",
        choices=["chinchilla", "data-constrained"],
        default="chinchilla",
        help="approach 3: data-constrained = Muennighoff et al. 2023 "
        "(repeated data discounted; needs unique tokens per run, column U)",
    ),
    Flag(
        "--terms",
        choices=list(TERMS),
        default=None,
        help="--law data-constrained: data+params = the paper's complete law, R_D_star and R_N_star fitted "
        "(default); data = the repeated-data term only (N' = N)",
    ),
    Flag(
        "--frontier-weights",
        choices=list(FRONTIER_WEIGHTS),
        default=None,
        help="approach 2: regress log N_opt on log C by OLS over budgets (default: Hoffmann et al. 2022, "
        "Porian et al. 2024) or weighted by 1/var(log N_opt) (each parabola vertex's precision)",
    ),
    *F.by(baseline=True),
)


def check(args) -> str | None:
    if args.top_k < 1:
        return f"--top-k must be >= 1 (got {args.top_k})"
    if args.curves and args.approach != 1:
        return (
            "--curves applies to --approach 1 only (intermediate points of a decaying schedule bias approaches 2 and 3)"
        )
    return F.by_problem(args)


# What a --by fit passes on to each group's fit_chinchilla.
BY_OPTIONS = (
    "seed",
    "ci",
    "approach",
    "drop_highest",
    "bootstrap",
    "holdout",
    "holdout_fraction",
    "grid",
    "top_k",
    "budget_tol",
    "at_compute",
    "compute_kind",
    "objective",
    "law",
    "max_embedding_fraction",
    "frontier_weights",
    "terms",
)


def fit(args, ds):
    """The typed options from the flags (--curves reads training curves into the table; the fit then
    detects them from it, as the library does)."""
    opts = options_from(ChinchillaOptions, args, curves=None)
    if args.by is None:
        from scaling.fits.chinchilla.approaches import fit_chinchilla  # deferred: numpy (a fast --help)

        return fit_chinchilla(ds, opts)
    from scaling.fits.by.compare import fit_chinchilla_by  # deferred: numpy, scipy, pandas (a fast --help)

    return fit_chinchilla_by(ds, by=args.by, baseline=args.baseline, **{k: getattr(opts, k) for k in BY_OPTIONS})


def predict(rec, data, columns, ci: float, seed: int):
    """Loss at new points of an approach-3 record, plain or data-constrained (approaches 1 and 2 are frontiers)."""
    from scaling.core.errors import InputError  # deferred: with the prediction
    from scaling.fits import loss_prediction as P  # deferred: numpy (a fast --help)

    if rec.get("approach") != 3:
        raise InputError(
            f"a chinchilla approach-{rec.get('approach')} fit is a compute-optimal frontier "
            "(N_opt, D_opt), not a loss law: predict needs an approach-3 fit"
        )
    return P.predict_loss_rows(rec, data, columns, ci, seed, roles=P.chinchilla_roles, model=P.chinchilla_model)


FAMILY = register(
    LawFamily(
        name="chinchilla",
        help="L(N,D) = E + A/N^alpha + B/D^beta (approach 3) or the compute-optimal frontier (1, 2)",
        flags=FLAGS,
        options=ChinchillaOptions,
        check=check,
        load=F.load_table,
        fit=fit,
        predict=predict,
        summary=F.loss_law_summary,
        plot=F.plot_table,
    )
)
