"""The command-line parser every `scalelab` command uses: options and positionals in any order.

Plain argparse fills a `nargs="*"` positional from the first run of positionals and then refuses
any that follow an option, so `scalelab train CONFIG --run-dir DIR train.tokens=1e6` fails with
"unrecognized arguments" while the same words with the overrides first work. This parser reads the
options first and the positionals after (argparse's intermixed parsing), so the order people type
is the order that works. The `scalelab` root parser is one; every subcommand's parser inherits the
class (`add_subparsers` makes its parsers of the parent's type), and a module's own
`python -m ...` entry point builds one directly.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, with options and positionals intermixed wherever argparse allows it.

    A parser with subcommands parses its own options and hands the rest to the chosen
    subcommand's parser, which intermixes in turn (argparse cannot intermix over subparsers).
    """

    _intermixing = False

    def parse_known_args(  # type: ignore[override]  # typeshed overloads the namespace argument
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._intermixing or not self._can_intermix():
            return super().parse_known_args(args, namespace)
        # parse_known_intermixed_args calls parse_known_args twice (options, then positionals):
        # those two calls take the plain path above
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False

    def _can_intermix(self) -> bool:
        """argparse's own conditions: no subcommands, no REMAINDER, no positional in an exclusive group."""
        positionals = self._get_positional_actions()
        if any(a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in positionals):
            return False
        grouped: set[Any] = {a for g in self._mutually_exclusive_groups for a in g._group_actions}
        return not any(a in grouped for a in positionals)
