"""`scalelab runs list|show|export`: the run registry from the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from launch.console_tables import render
from rundir.layout import RunDir
from rundir.metrics import last_record
from rundir.read import compute_totals, load_runs, read_run

LIST_COLUMNS = [
    "run",
    "status",
    "optim",
    "axis.*",
    "params",
    "non_embedding_params",
    "tokens",
    "epochs",
    "batch_size",
    "lr",
    "steps",
    "flops",
    "final_loss",
    "final_val_loss",
    "wall_s",
]


_FORMATS = {"flops": "sci", "shared_flops": "sci", "computed_flops": "sci"}


def register(sub) -> None:
    p = sub.add_parser("runs", help="the run registry: tables of run directories (summary + config + sweep axes)")
    rs = p.add_subparsers(dest="runs_command", metavar="ACTION")
    rs.required = True
    q = rs.add_parser("list", help="one row per run under ROOT")
    q.add_argument("root", nargs="?", default="runs")
    q.add_argument("--format", choices=["table", "csv", "json"], default="table")
    q.add_argument("--status", help="only runs in this state (done, failed, ...)")
    q.add_argument(
        "--optim",
        metavar="NAME",
        help="only runs trained with this optimizer (optim.name: adamw, muon, ...; a config without the key is adamw)",
    )
    q.add_argument("--columns", help="comma-separated columns (default: a useful subset; 'all' for every one)")
    q.set_defaults(func=cmd_list)
    q = rs.add_parser("show", help="everything about one run directory")
    q.add_argument("run_dir")
    q.set_defaults(func=cmd_show)
    q = rs.add_parser("export", help="write the full table to CSV, JSON or Parquet")
    q.add_argument("root", nargs="?", default="runs")
    q.add_argument("-o", "--output", required=True, help="file.csv | file.json | file.parquet")
    q.set_defaults(func=cmd_export)


def _problems(problems: list[dict]) -> None:
    for pr in problems:
        print(f"warning: {pr['path']}: {pr['problem']}", file=sys.stderr)


def _columns(df, spec: str | None) -> list[str]:
    if spec == "all":
        return list(df.columns)
    wanted = spec.split(",") if spec else LIST_COLUMNS
    out = []
    for c in wanted:
        if c.endswith("*"):
            out += [x for x in df.columns if x.startswith(c[:-1])]
        elif c in df.columns:
            out.append(c)
    return out


def cmd_list(args) -> int:

    if not Path(args.root).exists():
        print(f"error: {args.root} does not exist", file=sys.stderr)
        return 2
    df, problems = load_runs(args.root)
    if args.status and not df.empty:
        df = df[df["status"] == args.status]
    if args.optim and not df.empty:
        df = df[df["optim"] == args.optim] if "optim" in df.columns else df.iloc[0:0]
    cols = _columns(df, args.columns)
    rows = json.loads(df[cols].to_json(orient="records")) if not df.empty else []
    render(rows, [(c, c.removeprefix("axis."), _FORMATS.get(c, "")) for c in cols], args.format)
    if args.format == "table":
        print(
            f"\n{len(df)} runs under {args.root}" + (f", {len(problems)} unreadable (see warnings)" if problems else "")
        )
        line = compute_line(df.to_dict("records"))
        if line:
            print(line)
    _problems(problems)
    return 0


def compute_line(rows: list[dict]) -> str | None:
    """Branches share their parent's prefix: the study's compute counts it once (None: no branches)."""

    computed, separate = compute_totals(rows)
    if not separate or computed >= separate:
        return None
    return (
        f"compute: {computed:.3g} FLOPs with shared prefixes counted once ({separate:.3g} as separate runs: "
        f"saving {separate - computed:.3g}, {100 * (1 - computed / separate):.0f}%)"
    )


def cmd_show(args) -> int:

    d = Path(args.run_dir)
    if not d.is_dir():
        print(f"error: {d} is not a directory", file=sys.stderr)
        return 2
    row, problem = read_run(d)
    if problem:
        print(f"warning: {problem}", file=sys.stderr)
    if row is None:
        return 1
    for k, v in row.items():
        if v is not None:
            print(f"{k:28s} {v}")
    rec = last_record(RunDir(d).metrics)
    if rec:
        print("last metrics: " + json.dumps(rec))
    log = RunDir(d).train_log
    if log.exists():
        print(f"log: {log}")
    return 0


def cmd_export(args) -> int:

    df, problems = load_runs(args.root)
    out = Path(args.output)
    if out.suffix == ".csv":
        df.to_csv(out, index=False)
    elif out.suffix == ".json":
        df.to_json(out, orient="records", indent=1)
    elif out.suffix == ".parquet":
        df.to_parquet(out, index=False)
    else:
        print("error: --output must end in .csv, .json or .parquet", file=sys.stderr)
        return 2
    print(f"wrote {len(df)} runs to {out}")
    _problems(problems)
    return 0
