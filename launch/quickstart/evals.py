"""Evaluate many run directories in one process (lm-eval and torch are imported once).

    python -m launch.quickstart.evals RUN [RUN ...] --suite tiny [--limit N] [--threads T]

Runs whose newest step already has results for the suite are skipped; a failing run is
reported and the others go on (exit 1 if any failed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from base.cli import ArgumentParser
from rundir.layout import RunDir


def already_done(run: Path, suite: str) -> bool:
    try:
        steps = json.loads(RunDir(run).summary.read_text())["steps"]
        doc = json.loads(RunDir(run).eval_file(steps).read_text())
    except (FileNotFoundError, KeyError, json.JSONDecodeError):
        return False
    return suite in (doc.get("suites") or [])


def main(argv: list[str] | None = None) -> int:
    from evals.run_eval import evaluate_run  # deferred: imports numpy/pydantic (a fast scalelab --help)

    ap = ArgumentParser(prog="python -m launch.quickstart.evals")
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--suite", default="tiny")
    ap.add_argument("--limit", type=float, default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--tasks", default=None, help="comma-separated subset of the suite")
    args = ap.parse_args(argv)
    if args.threads:
        import torch  # deferred: imports torch

        torch.set_num_threads(args.threads)

    limit = int(args.limit) if args.limit and args.limit >= 1 else args.limit
    failed, task_cache = 0, {}
    for run in map(Path, args.runs):
        if already_done(run, args.suite):
            continue
        try:
            evaluate_run(
                run,
                suite=args.suite,
                tasks=args.tasks,
                limit=limit,
                bootstrap_iters=100,
                device="cpu",
                task_cache=task_cache,
            )
        except Exception as exc:  # one bad run must not stop the study
            failed += 1
            print(f"warning: evaluation of {run} failed: {type(exc).__name__}: {exc}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
