"""`scalelab study next`: fit records + a target budget -> the next runs that would most shrink the
law's intervals there per FLOP (scaling.planning.next_runs), printed beside today's intervals, as a
sweep spec (--sweep) and, from a menu (--candidates), as the menu's chosen rows (--out).

Registered by launch/cli.py. Exit codes: 0 ok, 2 bad input (before any work).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scaling.cli.options import fail, positive_float


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "study",
        help="what to run next in a scaling study",
        description="Commands about a scaling study as a whole (its next runs).",
    )
    sub = p.add_subparsers(dest="study_command", metavar="SUBCOMMAND")
    sub.required = True
    n = sub.add_parser(
        "next",
        help="the runs that most shrink the law's N_opt and loss intervals at a target budget, per FLOP",
        description="Propose the next runs (model size and tokens on the study's model family, or rows of a menu) "
        "that most reduce the width of the N_opt and predicted-loss intervals at the target budget per FLOP "
        "spent: a greedy design on the Fisher information of one run, starting from the fit's bootstrap "
        "covariance. The interval printed after the runs is a refit forecast (their losses simulated from the fit's "
        "bootstrap laws, the law refitted and bootstrapped) when the fitted runs are at hand, else the Fisher "
        "forecast (docs/scaling-laws.md, 'What to run next').",
    )
    n.add_argument(
        "fit_files",
        nargs="+",
        metavar="FIT.json",
        help="a chinchilla approach-3 fit record with --bootstrap (an approach-2 record beside it cross-checks "
        "the verdict's exponent), or a run tree or table (fitted here: approach 3 with --bootstrap)",
    )
    target = n.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--compute", type=positive_float, metavar="C", help="target budget in FLOPs (the fit's convention)"
    )
    target.add_argument(
        "--multiplier",
        type=positive_float,
        metavar="X",
        help="target budget as X times the largest fitted IsoFLOP budget (as the main job's plan.compute_multiplier)",
    )
    n.add_argument(
        "--budget-flops",
        type=positive_float,
        required=True,
        metavar="F",
        help="FLOPs the proposed runs may spend in all (the fit's convention)",
    )
    n.add_argument("--max-runs", type=int, default=8, metavar="K", help="at most K runs (default 8)")
    n.add_argument(
        "--candidates",
        metavar="TABLE",
        help="choose only among the rows of this csv/json menu (columns N and D, or params/non_embedding_params "
        "and tokens): feasible runs on a quota, or runs someone else trained",
    )
    n.add_argument("--out", metavar="F.csv", help="with --candidates: write the chosen rows of the menu as they are")
    n.add_argument(
        "--sweep",
        metavar="NEXT.yaml",
        help="write the proposed runs as a sweep spec (kind zip; with --law batch-lr kind batch_lr, one model and "
        "lr x batch grid per compute group) and NEXT.base.yaml, its base train config: scalelab sweep plan/launch "
        "NEXT.yaml",
    )
    n.add_argument(
        "--law",
        choices=("chinchilla", "batch-lr"),
        default="chinchilla",
        help="chinchilla (default): runs for N_opt and the loss; batch-lr: the compute groups and lr x batch grid "
        "that identify a batch/LR law's exponents (FIT.json: a `fit batch-lr` record)",
    )
    n.add_argument(
        "--bootstrap",
        type=int,
        default=100,
        metavar="B",
        help="given runs (a run tree or table) instead of a record: the approach-3 fit's resamples (default 100)",
    )
    n.add_argument(
        "--n-kind",
        choices=("total", "non_embedding"),
        default="total",
        help="given runs: which parameter count N is (as fit chinchilla --n-kind)",
    )
    n.add_argument(
        "--runs",
        metavar="PATH",
        help="the runs the fit record was fitted on (a table or run tree), for the refit forecast; default the "
        "record's source",
    )
    n.add_argument(
        "--forecast-draws",
        type=int,
        default=4,
        metavar="K",
        help="simulated futures of the forecast after the proposed runs (default 4: each refits the law on the runs "
        "and the proposed ones' simulated losses with the fit's procedure, and bootstraps it with min(20, the fit's "
        "B) resamples; 1 + 20 fits per future, seconds to minutes); 0: print the Fisher forecast only. With "
        "--screen refit: the futures of each screened batch (0: 4)",
    )
    n.add_argument(
        "--unique-tokens",
        type=positive_float,
        metavar="U",
        help="a data-constrained law (fit --law data-constrained): design for its optimum with U unique tokens "
        "(default: the fitted runs' data set, when they share one); as scalelab plan --unique-tokens",
    )
    n.add_argument(
        "--target",
        choices=("both", "n-opt", "loss"),
        default="both",
        help="which intervals at the target the runs should shrink: both (default: N_opt's and the loss at the "
        "optimum's, weighed equally as ratios to today's), n-opt (the model size alone) or loss (the predicted loss "
        "alone); the forecast shows both either way",
    )
    n.add_argument(
        "--screen",
        choices=("fisher", "refit"),
        default="fisher",
        help="what chooses the runs: fisher (default: the greedy Fisher design, fast, linearised) or refit (the "
        "Fisher picks for each --target and an IsoFLOP-like batch at the same FLOPs, each forecast by refitting the "
        "law on simulated losses, the best forecast per FLOP chosen; needs the fitted runs, minutes)",
    )
    n.add_argument(
        "--max-epochs",
        type=float,
        metavar="E",
        help="leave out candidate runs that repeat the fitted runs' unique tokens more than E times (default 4; for a "
        "data-constrained law twice the epochs of its optimum at the target when that is more, so the runs bracket "
        "the repetition the target needs)",
    )
    n.add_argument("--ci", type=float, default=0.95)
    n.add_argument("--json", action="store_true", help="print the proposal as JSON")
    n.set_defaults(func=cmd_next)


def cmd_next(args) -> int:
    from scaling.core.errors import InputError  # deferred: a fast --help
    from scaling.planning import next_runs  # deferred: imports scipy
    from scaling.planning.plan import budget

    if args.out and not args.candidates:
        return fail("--out writes the chosen rows of --candidates TABLE: give the menu", 2)
    if args.out and Path(args.out).suffix != ".csv":
        return fail(f"--out must name a .csv file (got {args.out})", 2)
    if not 0 < args.ci < 1:
        return fail(f"--ci must be between 0 and 1 (got {args.ci})", 2)
    try:
        fits = [_record(f, args) for f in args.fit_files]
        if args.law == "batch-lr":
            return _next_batch_lr(args, fits)
        ch = next((f for f in fits if f["law"] == "chinchilla" and f.get("approach") == 3), None)
        if ch is None:
            raise InputError(
                "study next needs a chinchilla approach-3 fit record (scalelab fit chinchilla --bootstrap 100)"
            )
        target = args.compute if args.compute else budget(ch, args.multiplier)
        cands = table = None
        if args.candidates:
            from scaling.core.conventions import conventions_of

            cands, table = next_runs.table_candidates(args.candidates, conventions_of(ch))
        if args.forecast_draws < 0:
            raise InputError(f"--forecast-draws must be >= 0 (got {args.forecast_draws})")
        given = [f for f in args.fit_files if not (f.endswith(".json") and Path(f).is_file())]
        prop = next_runs.propose(
            fits,
            target,
            budget=args.budget_flops,
            max_runs=args.max_runs,
            candidates=cands,
            ci=args.ci,
            runs=args.runs or (given[0] if given else None),
            forecast_draws=args.forecast_draws,
            unique_tokens=args.unique_tokens,
            target_of=args.target,
            screen=args.screen,
            max_epochs=args.max_epochs,
        )
        if args.sweep:
            next_runs.sweep_files(prop, fits, args.sweep)
    except InputError as exc:
        return fail(str(exc), 2)
    if args.out:
        next_runs.write_rows(args.candidates, table, [r["row"] for r in prop.rows], args.out)
    print(json.dumps(prop.as_dict(), indent=2) if args.json else next_runs.format_proposal(prop))
    for path in (args.sweep, args.out):
        if path:
            print(
                f"wrote {path}"
                + (" and " + str(Path(path).with_name(Path(path).stem + ".base.yaml")) if path == args.sweep else ""),
                file=sys.stderr,
            )
    return 0


def _next_batch_lr(args, fits) -> int:
    from scaling.core.errors import InputError  # deferred: a fast --help
    from scaling.planning.next_batch_lr import format_batch_lr, propose_batch_lr

    if args.candidates or args.out:
        raise InputError("--law batch-lr proposes compute groups: --candidates and --out are for --law chinchilla")
    if args.target != "both":
        raise InputError("--target chooses between N_opt's and the loss's intervals: it is for --law chinchilla")
    if args.max_epochs is not None:
        raise InputError("--max-epochs caps the candidate runs' repeats of the data: it is for --law chinchilla")
    hp = [f for f in fits if f["law"] == "batch-lr"]
    if len(hp) != 1:
        raise InputError("study next --law batch-lr takes one `scalelab fit batch-lr` record")
    rng = (hp[0].get("data_range") or {}).get("C")
    if args.compute:  # --compute and --multiplier are exclusive, one required
        target = args.compute
    elif rng:
        target = args.multiplier * rng[1]
    else:
        raise InputError("the batch-lr record states no compute range: give --compute")
    p = propose_batch_lr(hp[0], target, budget=args.budget_flops, max_groups=args.max_runs)
    if args.sweep:  # each group's model designed on the study's family, then written as a kind batch_lr spec
        from scaling.planning.next_batch_lr_sweep import design_groups, sweep_files

        p = design_groups(p, fits)
        spec, base = sweep_files(p, args.sweep)
        p = {k: v for k, v in p.items() if k != "recipe"}
    print(json.dumps(p, indent=2) if args.json else format_batch_lr(p))
    if args.sweep:
        print(f"wrote {spec} and {base}", file=sys.stderr)
    return 0


def _record(path: str, args):
    """A fit record, or runs (a directory or a table) fitted here by approach 3 with a bootstrap."""
    from scaling.fits.record import FitRecord  # deferred: imports numpy/pydantic

    p = Path(path)
    if p.suffix == ".json" and p.is_file():
        return FitRecord.load(p)
    from scaling.fits.chinchilla.approaches import fit_chinchilla  # deferred: imports scipy

    if args.bootstrap < 10:
        from scaling.core.errors import InputError

        raise InputError(f"--bootstrap must be >= 10 to design from runs (got {args.bootstrap})")
    print(f"fitting approach 3 on {path} (--bootstrap {args.bootstrap}) ...", file=sys.stderr)
    return fit_chinchilla(p, bootstrap=args.bootstrap, n_kind=args.n_kind, seed=0)
