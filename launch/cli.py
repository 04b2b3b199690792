"""The `scalelab` command: one entry point, one subcommand module per subsystem.

Each subsystem owns its commands in its own `cli.py` and exposes `register(subparsers)`;
this file only wires them together, so adding a subsystem never touches the others.
Exit codes everywhere: 0 success, 1 a run or job failed, 2 bad input (before any work).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from base.cli import ArgumentParser
from base.errors import UserError

# (module, attribute) pairs; imported lazily so `scalelab fit` never pays for torch.
SUBSYSTEMS = [
    "launch.commands.data",
    "pretrain.cli",
    "scaling.cli",
    "scaling.cli.design",
    "scaling.cli.study",
    "launch.commands.predict_curve",
    "launch.commands.sweep",
    "launch.commands.runs",
    "evals.cli",
    "dashboard.cli",
    "launch.quickstart.job",
]


def build_parser() -> argparse.ArgumentParser:
    # options and positionals in any order, in every subcommand (their parsers inherit the class)
    parser = ArgumentParser(
        prog="scalelab",
        description="LLM pretraining and scaling-law research platform.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBSYSTEMS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # subsystem not built yet
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except UserError as exc:  # every layer's user error, where a command did not report it itself
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())


def run() -> None:
    """Console-script entry point."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `scalelab runs list ... | head`: the reader left; not an error
        import os  # deferred: imports optional os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    dist = sys.modules.get(
        "pretrain.engine.distributed"
    )  # loaded only by a command that trains (torch is slow to import)
    if dist is not None:
        dist.exit_process(code)  # `srun scalelab train ...`: a rank must not abort after its run finished
    sys.exit(code)
