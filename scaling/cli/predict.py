"""`scalelab predict FIT.json TABLE_OR_RUNS [--col ROLE=COLUMN] [--out F.csv]` (scaling.planning.predict).

Registered by scaling/cli/__init__.py. Exit codes: 0 ok, 2 bad input (a record and data that do not match,
named in one `error:` line, before any output is written)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from scaling.core.errors import InputError

SHOW_ROWS = 40  # rows printed; --out has them all


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "predict",
        help="what a fit record predicts at new points, against what was measured",
        description="Predict loss (chinchilla approach 3, data-constrained, kaplan, moe, task-loss fits), accuracy "
        "(accuracy fits) or the optimal lr and batch (batch-lr fits) at the rows of a table or the runs of a "
        "run-directory tree, with a prediction interval (bootstrap laws x the fit's residual scatter); where "
        "the data has a measured value, the relative error and whether it lies inside. Loss curves: predict-curve.",
    )
    p.add_argument("fit", metavar="FIT.json", help="a fit record (scalelab fit ... --out)")
    p.add_argument(
        "data",
        metavar="TABLE_OR_RUNS",
        help="CSV/TSV/Parquet table or run-directory tree, read as the fit reads its data",
    )
    p.add_argument(
        "--col",
        action="append",
        default=[],
        metavar="ROLE=COLUMN",
        help="map a column to a role (the fit's roles: N, D, loss, U, flops, ...; G, E for moe; loss, acc, "
        "task for accuracy; task for task-loss)",
    )
    p.add_argument(
        "--out",
        metavar="F.csv",
        help="write every row: the inputs, predicted, <q>_lo, <q>_hi, measured, "
        "rel_error, inside, extrapolation_factor",
    )
    p.add_argument("--ci", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument("--seed", type=int, default=0, help="seed of the residual draws")
    p.add_argument("--json", action="store_true", help="print the rows and summary as JSON")
    p.set_defaults(func=cmd_predict)


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def cmd_predict(args: argparse.Namespace) -> int:
    # deferred: numpy, scipy, pandas (a fast --help)

    from scaling.fits.record import FitRecord  # deferred: numpy (a fast --help)
    from scaling.planning.predict import predict  # deferred: numpy (a fast --help)

    if not 0 < args.ci < 1:
        return _fail(f"--ci must be between 0 and 1 (got {args.ci})")
    if args.out and Path(args.out).is_dir():
        return _fail(f"--out {args.out} is a directory")
    if args.out and Path(args.out).suffix.lower() != ".csv":
        return _fail(f"--out {args.out}: give a .csv file name")
    try:
        rec = FitRecord.load(args.fit)
        pred = predict(rec, args.data, args.col, ci=args.ci, seed=args.seed)
    except InputError as exc:
        return _fail(str(exc))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        pred.df.to_csv(tmp, index=False)
        tmp.replace(out)
    if args.json:
        doc = {
            "fit": str(args.fit),
            "law": rec["law"],
            "data": str(args.data),
            "quantities": pred.quantities,
            "interval_kind": pred.interval_kind,
            "conventions": pred.conventions,
            "summary": pred.summary,
            "warnings": pred.warnings,
            "rows": json.loads(pred.df.to_json(orient="records")),
        }
        print(json.dumps(doc, indent=2))
    else:
        print(text(rec, pred))
    if args.out:
        print(f"wrote {args.out} ({len(pred.df)} rows)", file=sys.stderr)
    return 0


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def text(rec, pred) -> str:
    law = rec["law"] + (f" ({rec['settings']['law']})" if (rec.get("settings") or {}).get("law") else "")
    conv = ", ".join(f"{k} = {v}" for k, v in pred.conventions.items() if v is not None and k != "source")
    lines = [f"law: {law}; {conv}", f"interval: {pred.summary['ci']:.0%} {pred.interval_kind}"]
    df = pred.df
    cols = [c for c in df.columns]
    shown = df.head(SHOW_ROWS)
    cells = [cols] + [[_fmt(v) for v in row] for row in shown.itertuples(index=False)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cols))]
    lines += ["  " + "  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    if len(df) > SHOW_ROWS:
        lines.append(f"  ... {len(df) - SHOW_ROWS} more rows (--out F.csv has them all)")
    for q in pred.quantities:
        s = pred.summary[q]
        head = f"{q}: {s['n_points']} points"
        if s.get("mean_abs_rel_error") is not None:
            head += (
                f", {s['n_measured']} measured: mean |rel error| {s['mean_abs_rel_error']:.3%}, "
                f"max {s['max_abs_rel_error']:.3%}, mean {s['mean_rel_error']:+.3%}"
            )
        if s.get("coverage") is not None:
            head += (
                f"; coverage {s['n_inside']}/{s['n_measured']} ({s['coverage']:.0%}) inside the "
                f"{pred.summary['ci']:.0%} interval"
            )
        lines.append(head)
    s = pred.summary[pred.quantities[0]]
    if s["n_extrapolated"]:
        lines.append(
            f"extrapolation: {s['n_extrapolated']} of {s['n_points']} points lie outside the fitted range "
            f"(up to {s['max_extrapolation_factor']:.3g}x beyond it; column extrapolation_factor)"
        )
    lines += [f"warning: {w}" for w in pred.warnings]
    return "\n".join(lines)
