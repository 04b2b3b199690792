"""`scalelab fit {chinchilla,kaplan,batch-lr,critical-batch,accuracy,task-loss,moe,lr-annealing}`.

Registered by scaling/cli/__init__.py. Heavy imports (numpy, scipy, pandas, matplotlib) happen inside the
command functions so `scalelab --help` stays fast. Exit codes: 0 ok, 1 fit failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

from scaling.cli.fit_command import run_fit
from scaling.cli.moe import add_fit_parser
from scaling.cli.options import COMPUTE_KINDS, fail, positive_float
from scaling.data.columns import parse_columns


def _lambda(text: str):
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number or auto: {text!r}") from None


def _common(p: argparse.ArgumentParser, *, bootstrap: bool = True, plot: bool = True, task: bool = False) -> None:
    p.add_argument("data", metavar="DATA", help="CSV/Parquet file (columns N, D, loss, ...) or a run-directory tree")
    p.add_argument("--out", metavar="F.json", help="write the fit record here")
    if plot:
        p.add_argument("--plot", metavar="F.png", help="write diagnostic plots here (matplotlib)")
    p.add_argument(
        "--col",
        action="append",
        default=[],
        metavar="ROLE=COLUMN",
        help="map a column to a role (N, D, loss, flops, batch_tokens, lr, steps, "
        "U = unique tokens" + (", task" if task else "") + "); repeatable",
    )
    p.add_argument(
        "--n-kind",
        default="total",
        choices=["total", "non_embedding", "active"],
        help="which parameter count is N: run directories read it "
        "from summary.json; tables use their column of that kind "
        "(params / non_embedding_params / active_params) or declare the N column's kind (default: total)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (fits are deterministic given it)")
    p.add_argument("--ci", type=float, default=0.95, help="interval level (default 0.95)")
    if bootstrap:
        p.add_argument(
            "--bootstrap", type=int, default=0, metavar="N", help="bootstrap resamples for intervals (0: none)"
        )
    p.add_argument("--json", action="store_true", help="print the full record as JSON instead of a summary")


def _eval_reading(p: argparse.ArgumentParser, *, accuracy: bool) -> None:
    """How `fit accuracy` / `fit task-loss` read run directories' evaluations (scaling.data.eval_points)."""
    p.add_argument("--tasks", metavar="A,B", help="only these tasks (default: every task evaluated)")
    p.add_argument(
        "--loss-metric",
        choices=["bpb", "nats", "val_loss"] if accuracy else ["bpb", "nats"],
        default="bpb",
        help="task loss: bpb = gold_bpb, the gold continuation's bits "
        "per byte (OLMo's; default), nats = gold_nats, nats per token"
        + (
            ", val_loss = the run's validation loss (chains from `fit "
            "chinchilla`); for a table: what its loss column holds"
            if accuracy
            else ""
        ),
    )
    if accuracy:
        p.add_argument(
            "--acc-metric",
            choices=["acc", "acc_norm"],
            default="acc",
            help="accuracy: acc (default) or acc_norm where the task reports it",
        )
    p.add_argument(
        "--steps",
        choices=["last", "all"],
        default="last",
        help="run directories: each run's last evaluated step (default) or every one",
    )


def _compute_kind(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--compute-kind",
        choices=COMPUTE_KINDS,
        default=None,
        help="what compute C counts: 6*N*D with total or non-embedding N, or the trainer's FLOPs "
        "(default: the convention the runs' IsoFLOP sweep used, else 6*N*D with --n-kind's N)",
    )


def _by(p: argparse.ArgumentParser, *, baseline: bool) -> None:
    p.add_argument(
        "--by",
        metavar="KEY",
        help="fit one law per value of KEY: a dotted config key of the runs (e.g. optim.name; a key the "
        "config predates takes its schema default) or a table column"
        + (
            "; the record compares each law with the baseline's by compute multiplier at matched loss (`compare`)"
            if baseline
            else "; the laws are printed side by side"
        ),
    )
    if baseline:
        p.add_argument(
            "--baseline",
            metavar="VALUE",
            help="with --by: the value the others are compared with "
            "(default: adamw when present, else the first value)",
        )


def register(subparsers) -> None:
    fit = subparsers.add_parser(
        "fit", help="fit a scaling law to runs or a table", description="Fit scaling laws; writes a JSON fit record."
    )
    fsub = fit.add_subparsers(dest="law", metavar="LAW")
    fsub.required = True

    p = fsub.add_parser(
        "chinchilla", help="L(N,D) = E + A/N^alpha + B/D^beta (approach 3) or the compute-optimal frontier (1, 2)"
    )
    _common(p)
    p.add_argument(
        "--approach",
        type=int,
        default=3,
        choices=[1, 2, 3],
        help="1: lower envelope, 2: IsoFLOP parabolas, 3: parametric Huber fit (default)",
    )
    p.add_argument(
        "--drop-highest", type=int, default=0, metavar="K", help="drop the K highest-loss points first (Epoch drops 5)"
    )
    p.add_argument(
        "--holdout",
        choices=["largest"],
        help="fit on the smaller-compute runs, report the error on the largest: "
        "loss (approach 3) or N_opt at the held-out budget (approaches 1, 2)",
    )
    p.add_argument(
        "--holdout-fraction",
        type=float,
        default=0.1,
        help="without IsoFLOP budgets: fraction of runs (largest compute) held out (default 0.1)",
    )
    p.add_argument(
        "--grid",
        choices=["fast", "full"],
        default="fast",
        help="fast: L-BFGS-B from the best --top-k of the 4500-point grid; full: from all 4500",
    )
    p.add_argument("--top-k", type=int, default=32, help="starts run in the fast mode (default 32)")
    p.add_argument(
        "--budget-tol",
        type=float,
        default=0.15,
        help="approach 2: runs within this relative compute are one IsoFLOP budget",
    )
    p.add_argument(
        "--compute",
        type=positive_float,
        action="append",
        metavar="C",
        help="also report N_opt/D_opt/loss at this compute (repeatable)",
    )
    p.add_argument(
        "--curves",
        action="store_true",
        help="approach 1 on run directories: use every metrics.jsonl point of each run (training curves)",
    )
    _compute_kind(p)
    p.add_argument(
        "--max-embedding-fraction",
        type=float,
        default=None,
        metavar="F",
        help="leave out runs whose embeddings exceed this fraction "
        "of their parameters (tiny, embedding-dominated models)",
    )
    p.add_argument(
        "--objective",
        choices=["huber", "mle"],
        default="huber",
        help="approach 3: huber = sum of Huber(1e-3) log residuals (default); "
        "mle = Epoch's maximum likelihood (Huber-shaped density, free sigma)",
    )
    p.add_argument(
        "--law",
        dest="chinchilla_law",
        choices=["chinchilla", "data-constrained"],
        default="chinchilla",
        help="approach 3: data-constrained = Muennighoff et al. 2023 "
        "(repeated data discounted; needs unique tokens per run, column U)",
    )
    p.add_argument(
        "--terms",
        choices=["data+params", "data"],
        default=None,
        help="--law data-constrained: data+params = the paper's complete law, R_D_star and R_N_star fitted "
        "(default); data = the repeated-data term only (N' = N)",
    )
    p.add_argument(
        "--frontier-weights",
        choices=["ols", "inverse-variance"],
        default=None,
        help="approach 2: regress log N_opt on log C by OLS over budgets (default: Hoffmann et al. 2022, "
        "Porian et al. 2024) or weighted by 1/var(log N_opt) (each parabola vertex's precision)",
    )
    _by(p, baseline=True)
    p.set_defaults(func=cmd_fit_chinchilla)

    p = fsub.add_parser("kaplan", help="Kaplan L(N,D) = [(Nc/N)^(aN/aD) + Dc/D]^aD, or L(N), L(D)")
    _common(p)
    p.add_argument("--form", choices=["nd", "n", "d"], default="nd", help="nd (default), n = L(N), d = L(D)")
    p.add_argument("--drop-highest", type=int, default=0, metavar="K")
    p.add_argument("--holdout", choices=["largest"])
    p.set_defaults(func=cmd_fit_kaplan)

    p = fsub.add_parser("batch-lr", help="optimal lr and batch size as power laws in C (DeepSeek) or N, D (Step Law)")
    _common(p)
    p.add_argument(
        "--form", choices=["compute", "nd"], default="compute", help="compute: lr, B ~ C^x; nd: lr ~ N^x D^y, B ~ D^z"
    )
    p.add_argument(
        "--near-optimal-tol",
        type=float,
        default=0.0025,
        help="keep runs with loss <= best * (1 + tol) (default 0.0025)",
    )
    p.add_argument(
        "--optimum",
        choices=["best", "quadratic"],
        default="best",
        help="locate each group's optimum by its best run or a quadratic in (log lr, log B)",
    )
    p.add_argument(
        "--budget-tol", type=float, default=0.05, help="compute form: runs within this relative compute form one group"
    )
    p.add_argument(
        "--holdout",
        choices=["largest"],
        help="fit on the other groups, report the error of lr_opt and B_opt on the largest-compute group",
    )
    _compute_kind(p)
    _by(p, baseline=False)
    p.set_defaults(func=cmd_fit_batch_lr)

    p = fsub.add_parser(
        "critical-batch",
        help="steps-to-target vs batch: S = S_min (1 + B_crit/B) per model and target, B_crit(N), B_crit(D)",
    )
    _common(p)
    p.add_argument(
        "--target-loss",
        type=positive_float,
        action="append",
        metavar="L",
        help="run directories: target loss whose first crossing is read from each curve "
        "(repeatable; default: 3 per model, chosen so every batch size reaches them)",
    )
    p.add_argument(
        "--metric",
        choices=["loss", "val_loss"],
        default="loss",
        help="run directories: curve to read from metrics.jsonl (default: training loss)",
    )
    p.add_argument(
        "--smooth",
        type=float,
        metavar="F",
        help="run directories: smoothing window, relative half-width "
        "in steps (default 0.1 for loss, 0 for val_loss; 0 = none)",
    )
    p.add_argument(
        "--holdout",
        choices=["largest"],
        help="predict the largest-compute model's B_crit from the laws fitted on the other models",
    )
    p.set_defaults(func=cmd_fit_critical_batch)

    p = fsub.add_parser(
        "lr-annealing",
        help="loss curves vs lr schedule: L(s) = L0 + A*S1^-alpha - C*S2 (Tissue et al. 2024)",
        description="Fit the learning-rate annealing law to whole loss curves; the record predicts the curve of any "
        "schedule (scalelab predict-curve).",
    )
    p.add_argument(
        "data", metavar="DATA", help="run-directory tree, or a CSV/Parquet table with columns run, step, lr, loss"
    )
    p.add_argument(
        "--metric",
        choices=["loss", "val_loss"],
        default="loss",
        help="run directories: the metrics.jsonl curve (default loss: the training loss, compared over its log window)",
    )
    p.add_argument(
        "--lambda",
        dest="lam",
        type=_lambda,
        default=0.999,
        metavar="L",
        help="decay factor of the annealing momentum (default 0.999, "
        "the paper's), or auto: the grid value with the best fit",
    )
    p.add_argument(
        "--warmup",
        choices=["peak", "actual"],
        default="peak",
        help="peak (default): warmup steps count at the peak lr (the paper's section 3.4); actual: as scheduled",
    )
    p.add_argument(
        "--skip-fraction",
        type=float,
        default=0.0,
        metavar="F",
        help="leave out points before this fraction of each curve's steps (default 0: every point, as the "
        "authors' fitting script)",
    )
    p.add_argument(
        "--holdout",
        choices=["last-run", "tail"],
        help="last-run: fit on the other curves, predict the last "
        "(last run directory by path / last run in the table); "
        "tail: fit on each curve's early steps, predict its last --holdout-fraction",
    )
    p.add_argument(
        "--holdout-fraction",
        type=float,
        default=0.2,
        metavar="F",
        help="tail holdout: fraction of each curve's steps held out (default 0.2)",
    )
    p.add_argument(
        "--col",
        action="append",
        default=[],
        metavar="ROLE=COLUMN",
        help="table: map a column to a role (run, step, lr, loss); repeatable",
    )
    p.add_argument("--out", metavar="F.json", help="write the fit record here")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        metavar="N",
        help="bootstrap resamples of whole curves for intervals (0: none)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ci", type=float, default=0.95)
    p.add_argument("--json", action="store_true", help="print the full record as JSON instead of a summary")
    p.set_defaults(func=cmd_fit_lr_annealing)

    p = fsub.add_parser(
        "accuracy",
        help="task accuracy vs task loss: Acc(L) = a / (1 + exp(-k (L - L0))) + b (OLMo ladder step 2), per task",
    )
    p.add_argument(
        "data",
        metavar="DATA",
        help="a run-directory tree (each run's evals/<step>.json) or a CSV/Parquet table with a loss "
        "and an accuracy column (and optionally a task column)",
    )
    p.add_argument(
        "--col",
        action="append",
        default=[],
        metavar="ROLE=COLUMN",
        help="tables: map a column to a role (loss, acc, task); repeatable",
    )
    _eval_reading(p, accuracy=True)
    p.add_argument(
        "--chance",
        type=float,
        metavar="P",
        help="chance accuracy of every task, e.g. 0.25 for 4 choices (default: each task's own, "
        "1 / number of choices, from its evaluations): warns when every accuracy sits there",
    )
    p.add_argument("--out", metavar="F.json", help="write the fit record here")
    p.add_argument("--bootstrap", type=int, default=0, metavar="N", help="bootstrap resamples for intervals (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ci", type=float, default=0.95)
    p.add_argument("--json", action="store_true", help="print the full record as JSON instead of a summary")
    p.set_defaults(func=cmd_fit_accuracy)

    add_fit_parser(fsub, positive_float)  # MoE laws (Krajewski, Clark): scaling.cli.moe

    p = fsub.add_parser(
        "task-loss", help="per-task loss vs N, D: L_task = E + A/N^alpha + B/D^beta (OLMo ladder step 1), per task"
    )
    _common(p, plot=False, task=True)
    _eval_reading(p, accuracy=False)
    p.add_argument(
        "--holdout",
        choices=["largest"],
        help="fit each task on the smaller-compute runs, report the task-loss error on the largest",
    )
    p.add_argument(
        "--holdout-fraction",
        type=float,
        default=0.1,
        help="without IsoFLOP budgets: fraction of runs (largest compute) held out (default 0.1)",
    )
    _compute_kind(p)
    p.set_defaults(func=cmd_fit_task_loss)


def _run_fit(args, fit_fn, curves: bool = False, **kwargs) -> int:
    """A loss-law fit of `inputs.load`'s canonical table; --plot draws it once the record is saved."""
    from scaling.data import inputs  # deferred: numpy (a fast --help)
    from scaling.fits.plots import plot_fit  # deferred: numpy (a fast --help)

    loaded: dict = {}

    def fit():
        loaded["ds"] = inputs.load(args.data, parse_columns(args.col, inputs.ROLES), args.n_kind, curves=curves)
        return fit_fn(loaded["ds"], seed=args.seed, ci=args.ci, **kwargs)

    def plot(rec) -> None:
        if not args.plot:
            return
        try:
            plot_fit(rec, loaded["ds"].df, args.plot)
        except Exception as exc:  # a plot must never lose a finished fit
            print(f"warning: plot failed: {exc}", file=sys.stderr)

    def summary(rec) -> str:
        if not rec.get("by"):
            return rec.summary()
        from scaling.fits.by.compare import summary as by_summary  # deferred: numpy, scipy, pandas (a fast --help)

        return by_summary(rec)

    return run_fit(args, fit, summary=summary, after_save=plot)


def _by_options(args) -> str | None:
    """--by / --baseline problems found before any work."""
    if getattr(args, "baseline", None) is not None and not args.by:
        return "--baseline needs --by KEY"
    if args.by is not None and getattr(args, "plot", None):
        return "--plot draws one law; a --by record holds one per value: view it in the dashboard's Scaling view"
    if args.by is not None and getattr(args, "approach", 3) != 3:
        return f"--by compares laws by the loss they reach: it needs --approach 3 (got --approach {args.approach})"
    return None


def cmd_fit_chinchilla(args) -> int:
    from scaling.fits.chinchilla.approaches import fit_chinchilla  # deferred: numpy (a fast --help)

    if args.top_k < 1:
        return fail(f"--top-k must be >= 1 (got {args.top_k})", 2)
    if args.curves and args.approach != 1:
        return fail(
            "--curves applies to --approach 1 only (intermediate "
            "points of a decaying schedule bias approaches 2 and 3)",
            2,
        )
    problem = _by_options(args)
    if problem:
        return fail(problem, 2)
    fit = fit_chinchilla
    if args.by is not None:
        from scaling.fits.by.compare import fit_chinchilla_by  # deferred: numpy, scipy, pandas (a fast --help)

        fit = partial(fit_chinchilla_by, by=args.by, baseline=args.baseline)
    return _run_fit(
        args,
        fit,
        approach=args.approach,
        drop_highest_k=args.drop_highest,
        bootstrap=args.bootstrap,
        holdout=args.holdout,
        holdout_fraction=args.holdout_fraction,
        grid=args.grid,
        top_k=args.top_k,
        budget_tol=args.budget_tol,
        at_compute=args.compute,
        curves=args.curves,
        compute_kind=args.compute_kind,
        objective=args.objective,
        law=args.chinchilla_law,
        max_embedding_fraction=args.max_embedding_fraction,
        frontier_weights=args.frontier_weights,
        terms=args.terms,
    )


def cmd_fit_kaplan(args) -> int:
    from scaling.fits.kaplan import fit_kaplan  # deferred: numpy (a fast --help)

    return _run_fit(
        args,
        fit_kaplan,
        form=args.form,
        drop_highest_k=args.drop_highest,
        bootstrap=args.bootstrap,
        holdout=args.holdout,
    )


def cmd_fit_batch_lr(args) -> int:
    from scaling.fits.batch_lr import fit_batch_lr  # deferred: numpy (a fast --help)

    problem = _by_options(args)
    if problem:
        return fail(problem, 2)
    fit = fit_batch_lr
    if args.by is not None:
        from scaling.fits.by.compare import fit_batch_lr_by  # deferred: numpy, scipy, pandas (a fast --help)

        fit = partial(fit_batch_lr_by, by=args.by)
    return _run_fit(
        args,
        fit,
        form=args.form,
        near_optimal_tol=args.near_optimal_tol,
        optimum=args.optimum,
        bootstrap=args.bootstrap,
        budget_tol=args.budget_tol,
        holdout=args.holdout,
        compute_kind=args.compute_kind,
    )


def cmd_fit_critical_batch(args) -> int:
    from scaling.fits.critical_batch import fit_critical_batch  # deferred: numpy (a fast --help)

    return _run_fit(
        args,
        fit_critical_batch,
        bootstrap=args.bootstrap,
        target_loss=args.target_loss,
        metric=args.metric,
        smooth=args.smooth,
        holdout=args.holdout,
    )


def cmd_fit_lr_annealing(args) -> int:
    from scaling.lr_annealing.curves import TABLE_ROLES  # deferred: numpy (a fast --help)
    from scaling.lr_annealing.fit import fit_lr_annealing  # deferred: numpy (a fast --help)

    return run_fit(
        args,
        lambda: fit_lr_annealing(
            args.data,
            metric=args.metric,
            lam=args.lam,
            warmup=args.warmup,
            skip_fraction=args.skip_fraction,
            bootstrap=args.bootstrap,
            seed=args.seed,
            ci=args.ci,
            holdout=args.holdout,
            holdout_fraction=args.holdout_fraction,
            columns=parse_columns(args.col, TABLE_ROLES),
        ),
    )


def cmd_fit_accuracy(args) -> int:
    from scaling.fits.accuracy import ROLES as ACCURACY_ROLES  # deferred: numpy, scipy, pandas (a fast --help)
    from scaling.fits.accuracy import fit_accuracy, summary  # deferred: numpy, scipy, pandas (a fast --help)

    def fit():
        return fit_accuracy(
            args.data,
            columns=parse_columns(args.col, ACCURACY_ROLES),
            bootstrap=args.bootstrap,
            seed=args.seed,
            ci=args.ci,
            chance=args.chance,
            loss_metric=args.loss_metric,
            acc_metric=args.acc_metric,
            steps=args.steps,
            tasks=args.tasks,
        )

    return run_fit(args, fit, summary=summary)


def cmd_fit_task_loss(args) -> int:
    from scaling.data import inputs  # deferred: numpy (a fast --help)
    from scaling.fits.task_loss import fit_task_loss, summary  # deferred: numpy, scipy, pandas (a fast --help)

    def fit():
        return fit_task_loss(
            args.data,
            columns=parse_columns(args.col, (*inputs.ROLES, "task")),
            tasks=args.tasks,
            loss_metric=args.loss_metric,
            steps=args.steps,
            n_kind=args.n_kind,
            compute_kind=args.compute_kind,
            bootstrap=args.bootstrap,
            seed=args.seed,
            ci=args.ci,
            holdout=args.holdout,
            holdout_fraction=args.holdout_fraction,
        )

    return run_fit(args, fit, summary=summary)
