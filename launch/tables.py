"""Plain-text tables and number formats shared by `sweep` and `runs` commands."""
from __future__ import annotations

import json
import math
import sys
from typing import Any


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


def render(rows: list[dict], columns: list[tuple[str, str, str]], fmt: str = "table", out=None) -> None:
    """columns: (key, header, kind). fmt: table | csv | json."""
    out = out or sys.stdout
    if fmt == "json":
        out.write(json.dumps([{k: r.get(k) for k, _, _ in columns} for r in rows], indent=1, default=str) + "\n")
        return
    if fmt == "csv":
        import csv

        w = csv.writer(out)
        w.writerow([k for k, _, _ in columns])
        for r in rows:
            w.writerow(["" if r.get(k) is None else r.get(k) for k, _, _ in columns])
        return
    cells = [[h for _, h, _ in columns]] + [[human(r.get(k), kind) for k, _, kind in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for n, row in enumerate(cells):
        out.write("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")
