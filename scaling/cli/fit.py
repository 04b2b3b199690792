"""`scalelab fit <law>`: one subcommand per law family (scaling.fits.family.LawFamily), its flags
generated from the family's; registered by scaling/cli/__init__.py.

The families are scaling.fits.families' (the built-in ones in `BUILTIN` order, the order `scalelab fit --help`
lists them; a family registered anywhere else, a plug-in or a test's toy law, follows them). Family modules are light:
their fits (numpy, scipy, pandas, matplotlib) are imported when the command runs, so `scalelab --help`
stays fast. Exit codes: 0 ok, 1 fit failed, 2 bad input (scaling.cli.fit_command.run_fit).
"""

from __future__ import annotations

import argparse

from scaling.cli.fit_command import run_fit
from scaling.cli.options import fail
from scaling.fits.families import families
from scaling.fits.family import LawFamily


def register(subparsers) -> None:
    fit = subparsers.add_parser(
        "fit", help="fit a scaling law to runs or a table", description="Fit scaling laws; writes a JSON fit record."
    )
    fsub = fit.add_subparsers(dest="family", metavar="LAW")  # not `law`: chinchilla's and moe's --law set that
    fsub.required = True
    for family in families():
        add_family(fsub, family)


def add_family(fsub, family: LawFamily) -> argparse.ArgumentParser:
    """`scalelab fit <family.name>`: the family's flags, in order, and its command."""
    kw = {"help": family.help} | ({"description": family.description} if family.description else {})
    p = fsub.add_parser(family.name, **kw)
    for flag in family.flags:
        flag.add_to(p)
    p.set_defaults(func=lambda args: command(family, args))
    return p


def command(family: LawFamily, args: argparse.Namespace) -> int:
    """Check the options, read DATA, fit, save, print (run_fit), then --plot."""
    problem = family.check(args) if family.check else None
    if problem:
        return fail(problem, 2)
    loaded: dict = {}

    def fit():
        loaded["data"] = family.load(args) if family.load else args.data
        return family.fit(args, loaded["data"])

    def plot(rec) -> None:
        if family.plot and getattr(args, "plot", None):
            family.plot(rec, loaded["data"], args.plot)

    return run_fit(args, fit, summary=family.summary, after_save=plot)
