"""`scalelab fit moe` and the MoE branch of `scalelab plan` (registered by scaling/cli/fit.py and plan.py).

Heavy imports happen inside the commands. Exit codes: 0 ok, 1 fit failed, 2 bad input.
"""

from __future__ import annotations

import sys

from scaling.cli.fit_command import run_fit
from scaling.cli.options import fail
from scaling.core.errors import InputError
from scaling.data.columns import parse_columns


def add_fit_parser(fsub, positive_float) -> None:
    p = fsub.add_parser(
        "moe",
        help="MoE laws: Krajewski L(N, D, G) (default) or Clark L(N, E); N = active non-embedding parameters",
        description="Fit an MoE scaling law to run directories or a table with columns N (active non-embedding "
        "parameters), D, G (granularity), E (experts), loss; dense rows are E = 1, G = 1.",
    )
    p.add_argument(
        "data", metavar="DATA", help="CSV/Parquet table (N, D, G, E, loss) or a run-directory tree (dense and MoE runs)"
    )
    p.add_argument(
        "--law",
        dest="moe_law",
        choices=["krajewski", "clark"],
        default="krajewski",
        help="krajewski: L = c + (g/G^gamma + a)/N^alpha + b/D^beta "
        "(default); clark: log10 L = a log N + b log E + c log N log E + d",
    )
    p.add_argument(
        "--col",
        action="append",
        default=[],
        metavar="ROLE=COLUMN",
        help="map a column to a role (N, D, G, E, loss, top_k, flops); repeatable",
    )
    p.add_argument(
        "--holdout", choices=["largest"], help="fit without the largest-compute runs and report the loss error on them"
    )
    p.add_argument(
        "--holdout-fraction",
        type=float,
        default=0.1,
        help="without 3+ compute groups: fraction of runs (largest compute) held out (default 0.1)",
    )
    p.add_argument("--bootstrap", type=int, default=0, metavar="N", help="bootstrap resamples for intervals (0: none)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--ci", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument(
        "--top-k",
        type=int,
        default=32,
        help="krajewski: L-BFGS-B starts from the best of the 108,000-point grid (default 32)",
    )
    p.add_argument(
        "--delta",
        type=positive_float,
        default=1e-3,
        help="Huber delta on log-loss residuals (default 1e-3; Krajewski et al. used 0.1)",
    )
    p.add_argument(
        "--compute",
        type=positive_float,
        action="append",
        metavar="C",
        help="krajewski: also report the optimum at this compute (repeatable)",
    )
    p.add_argument("--out", metavar="F.json", help="write the fit record here")
    p.add_argument("--json", action="store_true", help="print the full record as JSON instead of a summary")
    p.set_defaults(func=cmd_fit_moe)


def summary(rec) -> str:
    """The record's summary with the MoE law named and its optimum at the largest fitted compute."""
    lines = rec.summary().splitlines()
    lines[0] = f"law: moe ({rec['settings']['law']})"
    derived = rec.get("derived")
    if isinstance(derived, list) and derived:  # krajewski: rows by compute
        cmax = (rec.get("data_range") or {}).get("C", [0, 0])[1]
        row = min(derived, key=lambda r: abs(r["C"] - cmax) / max(r["C"], cmax))
        lines.insert(
            3,
            f"at C = {row['C']:.3g}: best G = {row['G']:g} (fitted range), "
            f"loss {row['loss_opt']:.4f} vs dense {row['dense_loss_opt']:.4f}; "
            f"dense needs {row['compute_multiplier']:.3g}x the compute",
        )
    elif isinstance(derived, dict) and derived.get("rows"):  # clark
        cut = derived.get("cutoff_N")
        lines.insert(3, "experts stop helping beyond N = " + (f"{cut:.3g}" if cut else "(no cutoff: c <= 0)"))
    return "\n".join(lines)


def cmd_fit_moe(args) -> int:
    from scaling.data.moe_inputs import ROLES  # deferred: numpy (a fast --help)
    from scaling.moe.fit import fit_moe  # deferred: numpy (a fast --help)

    return run_fit(
        args,
        lambda: fit_moe(
            args.data,
            law=args.moe_law,
            columns=parse_columns(args.col, ROLES),
            holdout=args.holdout,
            holdout_fraction=args.holdout_fraction,
            bootstrap=args.bootstrap,
            seed=args.seed,
            ci=args.ci,
            top_k=args.top_k,
            delta=args.delta,
            at_compute=args.compute,
        ),
        summary=summary,
    )


def plan_moe(args, fits) -> int:
    """`scalelab plan` with an MoE fit record: --compute only (the device and inference forms are the dense plan's)."""
    # deferred: numpy, scipy, pandas (a fast --help)

    from scaling.moe.plan import format_moe_plan, make_moe_plan  # deferred: numpy (a fast --help)
    from scaling.moe.run import emit_moe_config  # deferred: numpy (a fast --help)

    try:
        if len(fits) != 1:
            raise InputError(f"an MoE plan takes exactly one fit record (the `scalelab fit moe` one); got {len(fits)}")
        other = [
            f"--{k.replace('_', '-')}"
            for k in ("budget_usd", "device_hours", "days", "target_loss", "inference_tokens", "device")
            if getattr(args, k, None) is not None
        ]
        if other or args.compute is None:
            raise InputError(
                "an MoE plan takes --compute C (FLOPs in the fit's 6ND_active_nonembed convention)"
                + (f"; {', '.join(other)} apply to dense plans only" if other else "")
            )
        plan = make_moe_plan(
            fits[0],
            args.compute,
            ci=args.ci,
            compute_kind=args.compute_kind,
            vocab_size=args.vocab_size,
            presets_only=args.presets_only,
            shape_rule=args.shape_rule,
        )
        if args.emit_config:
            emit_moe_config(plan, args.emit_config, micro_batch_size=args.micro_batch_size)
            plan["emitted_config"] = args.emit_config
    except InputError as exc:
        return fail(str(exc), 2)
    if args.out:
        plan.save(args.out)
    print(plan.to_json() if args.json else format_moe_plan(plan))
    if args.emit_config:
        print(f"wrote {args.emit_config}", file=sys.stderr)
    return 0
