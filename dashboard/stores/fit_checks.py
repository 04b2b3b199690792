"""Is a fit record's law identified well enough to draw? The reasons when it is not.

A fitted law is drawn (curves, extrapolation, log axes spanning its predictions) only when it says
something. It is flagged instead, and only its parameter table is shown, when:
  * its own warnings say a parameter is not identified or its estimate stopped on a bound
    (bootstrap resamples on a bound, or failed ones, count when they are half or more of them);
  * an exponent is zero to rounding (|value| < 1e-9): the fitted optimum did not move across the
    data (e.g. the same grid point won at every budget), and its curve is flat to 1e-16, which a
    log axis renders as ticks like 0.00300000000000744 and a staircase;
  * any interval spans more than 30 decades (resamples that ran off to degenerate fits).
Which parameters are exponents depends on the law (`_is_exponent`); a record of several tasks is
judged task by task, a `--by` record group by group. The thresholds are deliberately loose: a flag
means "this law cannot be read", not "wide" (a wide but finite interval is shown in the table and the record's own
warnings, and the law is drawn).
"""

from __future__ import annotations

import math
import re

ZERO_EXPONENT = 1e-9
MAX_DECADES = 30.0
_EXPONENT = re.compile(r"(^|_)exp(_|$)|^alpha|^beta|^a$|^b$")
_WARN = re.compile(r"not (separately )?identified|stopped on its bound|on a bound", re.I)
_BOOT_BOUND = re.compile(r"on its bound in (\d+) of (\d+) bootstrap")
_BOOT_FAIL = re.compile(
    r"^(?:[\w.-]+: )?(\d+) of (\d+) bootstrap resamples failed"
)  # "task: " prefix of a per-task fit


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _is_exponent(rec: dict):
    """Which parameter names are exponents (or slopes) for this law: a level or coefficient at zero
    is a fitted value, not a law that did not move (an accuracy floor b = 0, Krajewski's a)."""
    law, st = rec.get("law"), rec.get("settings") or {}
    if law == "accuracy":  # a flat sigmoid is warned by the fitter itself ("not identified")
        return lambda k: False
    if law == "moe":
        names = {"a"} if st.get("law") == "clark" else {"alpha", "beta"}
        return names.__contains__
    return lambda k: bool(_EXPONENT.search(k))


def not_identified(rec: dict, task: str | None = None) -> list[str]:
    """Plain-language reasons this record's law is not identified (empty: fine to draw).

    A record of several tasks (`fit task-loss`, `fit accuracy`) is judged per task: with `task`,
    that task's own fit; without, every task's reasons, each prefixed with its task."""
    groups = rec.get("groups") if isinstance(rec.get("groups"), dict) else None
    if groups:  # a --by record: each value's law judged on its own (a group that could not be fitted: its reason)
        out = []
        for name, g in groups.items():
            if not isinstance(g, dict):
                continue
            why = (
                not_identified(g["record"]) if isinstance(g.get("record"), dict) else [f"not fitted: {g.get('reason')}"]
            )
            out += [f"{rec.get('by')}={name}: {w}" for w in why]
        return out
    tasks = rec.get("tasks") if isinstance(rec.get("tasks"), dict) else None
    if tasks:
        names = [task] if task is not None else list(tasks)
        out = []
        for name in names:
            sub = tasks.get(name)
            if isinstance(sub, dict):
                why = not_identified({"law": rec.get("law"), "settings": rec.get("settings"), **sub})
                out += why if task is not None else [f"task {name}: {w}" for w in why]
        return out
    out: list[str] = []
    for w in rec.get("warnings") or []:
        if not isinstance(w, str):
            continue
        m = _BOOT_BOUND.search(w) or _BOOT_FAIL.search(w)
        if (m and int(m[1]) * 2 >= int(m[2])) or (not m and _WARN.search(w)):
            out.append(w)
    params = rec.get("params") if isinstance(rec.get("params"), dict) else {}
    exponent = _is_exponent(rec)
    intervals = rec.get("intervals") if isinstance(rec.get("intervals"), dict) else {}
    for k, v in params.items():
        v = _num(v)
        if v is not None and exponent(k) and abs(v) < ZERO_EXPONENT:
            out.append(
                f"{k} = {v:.3g} is zero to rounding: the fitted optimum did not move across the data, "
                "so this exponent is not measured"
            )
    for k, iv in intervals.items():
        if not isinstance(iv, (list, tuple)) or len(iv) != 2:
            continue
        lo, hi = _num(iv[0]), _num(iv[1])
        if lo is None or hi is None:
            continue
        if lo > 0 and math.log10(hi / lo) > MAX_DECADES:
            out.append(f"{k}'s interval [{lo:.3g}, {hi:.3g}] spans {math.log10(hi / lo):.0f} decades")
    return out
