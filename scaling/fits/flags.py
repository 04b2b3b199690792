"""The arguments law families share (scaling.fits.family.Flag), in the order `--help` lists them,
and the light argument types and names they use (no numpy: `scalelab --help` imports them)."""

from __future__ import annotations

import argparse

from scaling.fits.family import Flag

COMPUTE_KINDS = ("6ND_total", "6ND_nonembed", "trainer_flops")  # scaling.core.conventions (light: no numpy at --help)


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return v


def data_flag(help: str = "CSV/Parquet file (columns N, D, loss, ...) or a run-directory tree") -> Flag:
    return Flag("data", metavar="DATA", help=help)


def out_flag() -> Flag:
    return Flag("--out", metavar="F.json", help="write the fit record here")


def col_flag(help: str) -> Flag:
    return Flag("--col", action="append", default=[], metavar="ROLE=COLUMN", help=help)


def json_flag() -> Flag:
    return Flag("--json", action="store_true", help="print the full record as JSON instead of a summary")


def bootstrap_flag(help: str = "bootstrap resamples for intervals (0: none)") -> Flag:
    return Flag("--bootstrap", type=int, default=0, metavar="N", help=help)


def common(*, bootstrap: bool = True, plot: bool = True, task: bool = False) -> tuple[Flag, ...]:
    """DATA, --out, --plot, --col, --n-kind, --seed, --ci, --bootstrap, --json: the loss laws' arguments."""
    return (
        data_flag(),
        out_flag(),
        *((Flag("--plot", metavar="F.png", help="write diagnostic plots here (matplotlib)"),) if plot else ()),
        col_flag(
            "map a column to a role (N, D, loss, flops, batch_tokens, lr, steps, "
            "U = unique tokens" + (", task" if task else "") + "); repeatable"
        ),
        Flag(
            "--n-kind",
            default="total",
            choices=["total", "non_embedding", "active"],
            help="which parameter count is N: run directories read it "
            "from summary.json; tables use their column of that kind "
            "(params / non_embedding_params / active_params) or declare the N column's kind (default: total)",
        ),
        Flag("--seed", type=int, default=0, help="bootstrap seed (fits are deterministic given it)"),
        Flag("--ci", type=float, default=0.95, help="interval level (default 0.95)"),
        *((bootstrap_flag(),) if bootstrap else ()),
        json_flag(),
    )


def eval_reading(*, accuracy: bool) -> tuple[Flag, ...]:
    """How `fit accuracy` / `fit task-loss` read run directories' evaluations (scaling.data.eval_points)."""
    return (
        Flag("--tasks", metavar="A,B", help="only these tasks (default: every task evaluated)"),
        Flag(
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
        ),
        *(
            (
                Flag(
                    "--acc-metric",
                    choices=["acc", "acc_norm"],
                    default="acc",
                    help="accuracy: acc (default) or acc_norm where the task reports it",
                ),
            )
            if accuracy
            else ()
        ),
        Flag(
            "--steps",
            choices=["last", "all"],
            default="last",
            help="run directories: each run's last evaluated step (default) or every one",
        ),
    )


def compute_kind() -> Flag:
    return Flag(
        "--compute-kind",
        choices=COMPUTE_KINDS,
        default=None,
        help="what compute C counts: 6*N*D with total or non-embedding N, or the trainer's FLOPs "
        "(default: the convention the runs' IsoFLOP sweep used, else 6*N*D with --n-kind's N)",
    )


def by(*, baseline: bool) -> tuple[Flag, ...]:
    """--by KEY (one law per value), and with a baseline to compare against, --baseline VALUE."""
    return (
        Flag(
            "--by",
            metavar="KEY",
            help="fit one law per value of KEY: a dotted config key of the runs (e.g. optim.name; a key the "
            "config predates takes its schema default) or a table column"
            + (
                "; the record compares each law with the baseline's by compute multiplier at matched loss (`compare`)"
                if baseline
                else "; the laws are printed side by side"
            ),
        ),
        *(
            (
                Flag(
                    "--baseline",
                    metavar="VALUE",
                    help="with --by: the value the others are compared with "
                    "(default: adamw when present, else the first value)",
                ),
            )
            if baseline
            else ()
        ),
    )


def by_problem(args: argparse.Namespace) -> str | None:
    """--by / --baseline problems found before any work."""
    if getattr(args, "baseline", None) is not None and not args.by:
        return "--baseline needs --by KEY"
    if args.by is not None and getattr(args, "plot", None):
        return "--plot draws one law; a --by record holds one per value: view it in the dashboard's Scaling view"
    if args.by is not None and getattr(args, "approach", 3) != 3:
        return f"--by compares laws by the loss they reach: it needs --approach 3 (got --approach {args.approach})"
    return None


# ---------------------------------------------------------------- the loss laws' shared steps
# TABLE_FIELDS (scaling.fits.family): the flags load_table reads, not every law's options


def load_table(args: argparse.Namespace):
    """DATA as the loss laws' canonical table (scaling.data.inputs.load; --curves: every metrics point)."""
    from scaling.data import inputs  # deferred: numpy, pandas (a fast --help)
    from scaling.data.columns import parse_columns  # deferred: with inputs

    return inputs.load(
        args.data, parse_columns(args.col, inputs.ROLES), args.n_kind, curves=getattr(args, "curves", False)
    )


def loss_law_summary(rec) -> str:
    """The record's summary; a --by record's laws side by side."""
    if not rec.get("by"):
        return rec.summary()
    from scaling.fits.by.compare import summary as by_summary  # deferred: numpy, scipy, pandas (a fast --help)

    return by_summary(rec)


def plot_table(rec, ds, path: str) -> None:
    """--plot: the law over the table it was fitted to (a plot must never lose a finished fit)."""
    import sys

    from scaling.fits.plots import plot_fit  # deferred: matplotlib (a fast --help)

    try:
        plot_fit(rec, ds.df, path)
    except Exception as exc:  # a plot must never lose a finished fit
        print(f"warning: plot failed: {exc}", file=sys.stderr)
