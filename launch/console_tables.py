"""Tables and number formats shared by `sweep` and `runs` commands (rich on a terminal, plain text otherwise)."""

from __future__ import annotations

import csv
import json
import math
import sys
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text


def human(x: Any, kind: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if kind == "time":
        s = int(x)
        return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
    if kind == "pct":
        return f"{100 * x:.0f}%"
    if kind == "sci":
        return f"{x:.2e}"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) >= 1000):
        x = float(x)
        for scale, suf in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(x) >= scale:
                return f"{x / scale:.3g}{suf}"
        return str(int(x))
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


# State colours in a terminal (`sweep status` state, `runs list` status).
STATE_STYLES = {
    "done": "green",
    "failed": "bold red",
    "stale": "red",
    "preempted": "yellow",
    "partial": "yellow",
    "running": "cyan",
    "queued": "blue",
    "pending": "dim",
}


def render(rows: list[dict], columns: list[tuple[str, str, str]], fmt: str = "table", out=None) -> None:
    """columns: (key, header, kind). fmt: table | csv | json. A table is drawn with rich on a
    terminal and as aligned plain text otherwise (logs, pipes, tests)."""
    out = out or sys.stdout
    if fmt == "json":
        out.write(json.dumps([{k: r.get(k) for k, _, _ in columns} for r in rows], indent=1, default=str) + "\n")
        return
    if fmt == "csv":
        w = csv.writer(out)
        w.writerow([k for k, _, _ in columns])
        for r in rows:
            w.writerow(["" if r.get(k) is None else r.get(k) for k, _, _ in columns])
        return
    headers = [h for _, h, _ in columns]
    cells = [[human(r.get(k), kind) for k, _, kind in columns] for r in rows]
    if _is_terminal(out):
        _rich(headers, cells, [k for k, _, _ in columns], out)
    else:
        _plain(headers, cells, out)


def _is_terminal(out) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


def _plain(headers: list[str], cells: list[list[str]], out) -> None:
    cells = [headers] + cells
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        out.write(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip() + "\n"
        )
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def _rich(headers: list[str], cells: list[list[str]], keys: list[str], out) -> None:

    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for i, h in enumerate(headers):
        table.add_column(h, justify="left" if i == 0 else "right", overflow="fold")
    styled = [i for i, k in enumerate(keys) if k in ("state", "status")]
    for row in cells:  # Text, not markup: a run name or error may hold [brackets]
        table.add_row(*(Text(c, style=STATE_STYLES.get(c, "") if i in styled else "") for i, c in enumerate(row)))
    Console(file=out, force_terminal=True, highlight=False).print(table)
