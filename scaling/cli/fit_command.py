"""The tail every `scalelab fit <law>` shares: check the options, fit, save, print.

One place decides the exit codes (0 ok, 1 the fit failed, 2 bad input) and what is written where:
the record to --out, the summary (or with --json the full record) to stdout, `wrote F` to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from scaling.cli.options import check_outputs, fail
from scaling.core.errors import FitError, InputError


def run_fit(
    args,
    fit: Callable[[], Any],
    *,
    summary: Callable[[Any], str] | None = None,
    after_save: Callable[[Any], None] | None = None,
) -> int:
    """Run `fit()` (it parses its inputs too, so a bad --col is an InputError) and report the record.

    `summary(rec)` is the text shown without --json (default: the record's own `summary()`);
    `after_save(rec)` runs once the record is saved (the diagnostic plot), before anything is printed."""
    problem = check_outputs(args)
    if problem:
        return fail(problem, 2)
    try:
        rec = fit()
    except InputError as exc:
        return fail(str(exc), 2)
    except FitError as exc:
        return fail(str(exc), 1)
    if args.out:
        rec.save(args.out)
    if after_save is not None:
        after_save(rec)
    print(rec.to_json() if args.json else (summary(rec) if summary else rec.summary()))
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
