"""`scalelab data prepare CONFIG [--executor local|slurm|ray] [--tasks K]`: the data command, fanned out.

The command itself (config, overrides, mixtures, the summary) is `pretrain.data.cli`; this adds where
its tasks run. One task on the local executor is the in-process `prepare`; K tasks, or any other
executor, is `prepare_in_tasks` with the executor's runner (launch.executors.data_tasks).
"""

from __future__ import annotations

import argparse
import sys

from launch.executors import DATA_EXECUTORS
from pretrain.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    from pretrain.data import cli as data_cli  # deferred: imports numpy/pydantic (a fast scalelab --help)

    p = data_cli.register(sub)
    p.add_argument(
        "--executor",
        choices=DATA_EXECUTORS,
        default="local",
        help="where the tasks run: local (a process pool, default), slurm (a job array per pass), "
        "ray (RAY_ADDRESS, else a local Ray; pip install 'scalelab[ray]')",
    )
    p.add_argument(
        "--tasks", type=int, metavar="K", help="cut the preparation into K tasks (default: data.tasks, else 1)"
    )
    p.add_argument(
        "--sbatch-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="--executor slurm: an sbatch option for the task arrays, e.g. --sbatch-arg=--partition=cpu (repeatable)",
    )
    p.set_defaults(func=cmd_prepare)


def cmd_prepare(args: argparse.Namespace) -> int:
    from pretrain.data import cli as data_cli  # deferred: imports numpy/pydantic (a fast scalelab --help)

    if args.tasks is not None and args.tasks < 1:
        print(f"error: --tasks must be a whole number >= 1, got {args.tasks}", file=sys.stderr)
        return 2
    if args.sbatch_arg and args.executor != "slurm":
        print("error: --sbatch-arg is for --executor slurm", file=sys.stderr)
        return 2
    # deferred: the executors import numpy and tokenizers, which `scalelab --help` never loads
    from launch.executors.data_tasks import make_runner

    log = lambda msg: print(msg, flush=True)  # noqa: E731
    try:
        if args.executor == "ray":
            make_runner("ray", log)  # the missing package is a usage error, before any work
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def prepare_fn(cfg, log=log, force=False):
        from pretrain.data.prepare import prepare  # deferred, as above
        from pretrain.data.prepare_tasks import (
            prepare_in_tasks,  # deferred: imports numpy, pydantic, tokenizers (a fast --help)
        )

        k = args.tasks or cfg.tasks
        if k == 1 and args.executor == "local":
            return prepare(cfg, log=log, force=force)
        runner = make_runner(args.executor, log, workers=cfg.workers, sbatch_args=args.sbatch_arg)
        return prepare_in_tasks(cfg, k, runner, log=log, force=force)

    args.prepare_fn = prepare_fn
    return data_cli.cmd_prepare(args)
