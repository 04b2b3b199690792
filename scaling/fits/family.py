"""A law family: everything `scalelab fit <law>` needs to know of one law, as one object, registered once.

    FAMILY = LawFamily(
        name="toy",                                   # scalelab fit toy
        help="y = a x^b",                             # its line in `scalelab fit --help`
        flags=(*common_flags(), Flag("--form", choices=("a", "b"), default="a", help="...")),
        fit=fit_toy,                                  # (args, data) -> FitRecord
    )
    register(FAMILY)

`flags` are the command's arguments in the order `--help` lists them; each names the typed option
it sets (`dest`, by default the flag's name): a field of the family's typed `options` (a dataclass,
built from the parsed arguments by `options_from(Options, args)`) or one of the command's own
(DATA, --out, --plot, --col, --json, --by, --baseline: `CLI_FIELDS`). `check` refuses bad combinations
before any work (its message is printed as `error: ...`, exit 2); `load` reads DATA (default: the
path as given) and `fit(args, data)` returns the fit record; `summary` is the text printed without
--json (default: the record's own `summary()`); `plot(rec, data, path)` draws --plot once the record
is saved. `predict(rec, data, columns, ci, seed)` is `scalelab predict FIT.json DATA` (and
`scaling.predict`) for the family's records: a `scaling.fits.prediction.Prediction` of the record at DATA's
rows (scaling/fits/loss_prediction.py gives the loss laws' shared steps); a family without one is refused
by name. A record's law object is `scaling.laws.registry.from_record`, which the record's `law` names.
scaling/cli/fit.py turns a family into its subcommand (`add_family`).

This module is light (no numpy): `scalelab --help` imports every family, and a family imports its
fit (and its prediction) inside `fit` (`predict`). The built-in families are registered by importing
scaling.fits.families, in its `BUILTIN` order; any other registered family follows them (a test's toy
law, a plug-in).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

Opts = TypeVar("Opts")
_UNSET: Any = object()


@dataclass(frozen=True)
class Flag:
    """One argument of `scalelab fit <law>`, as argparse takes it (a `name` without dashes is positional).
    Only the attributes given reach argparse, so the generated `--help` is what hand-written calls printed."""

    name: str
    help: str | None = None
    dest: str | None = None
    type: Callable[[str], Any] | None = None
    default: Any = _UNSET
    choices: Sequence[Any] | None = None
    metavar: str | None = None
    action: str | None = None

    @property
    def field(self) -> str:
        """The typed option this flag sets: `dest`, else the flag's name (`--top-k` -> `top_k`)."""
        return self.dest or self.name.lstrip("-").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        kw: dict[str, Any] = {
            k: getattr(self, k) for k in ("help", "dest", "type", "choices", "metavar", "action") if getattr(self, k)
        }
        if self.default is not _UNSET:
            kw["default"] = self.default
        if not self.name.startswith("-"):
            kw.pop("dest", None)  # a positional's dest is its name
        parser.add_argument(self.name, **kw)


@dataclass(frozen=True)
class LawFamily:
    """A law's `scalelab fit` command: its name, help, arguments and what runs them."""

    name: str
    help: str
    flags: tuple[Flag, ...]
    fit: Callable[[argparse.Namespace, Any], Any]  # (args, data) -> FitRecord; raises InputError / FitError
    description: str | None = None
    options: type | None = None  # the typed options (a dataclass) its flags set, field by field
    check: Callable[[argparse.Namespace], str | None] | None = None  # a problem with the options, or None
    load: Callable[[argparse.Namespace], Any] | None = None  # (args) -> data (default: args.data)
    summary: Callable[[Any], str] | None = None  # (record) -> the printed text
    plot: Callable[[Any, Any, str], None] | None = None  # (record, data, path): --plot, after the save
    # (record, data, --col items, ci, seed) -> Prediction: `scalelab predict`; None: its records predict nothing
    predict: Callable[[Any, Any, list[str] | None, float, int], Any] | None = None


CLI_FIELDS = frozenset({"data", "out", "plot", "col", "json", "by", "baseline"})
TABLE_FIELDS = frozenset({"n_kind", "curves"})  # read with DATA by flags.load_table, not a law's options
FAMILIES: dict[str, LawFamily] = {}


def register(family: LawFamily) -> LawFamily:
    """Make `family` a `scalelab fit` subcommand (once: a second family of the same name is refused).
    A flag nothing reads is refused here, when the family is written, not found by a user whose option
    is silently ignored: --plot without a `plot`, or a flag that sets no field of the typed `options`."""
    known = FAMILIES.get(family.name)
    if known is not None and known is not family:
        raise ValueError(f"a law family named {family.name!r} is registered already")
    fields = {f.field: f.name for f in family.flags}
    if "plot" in fields and family.plot is None:
        raise ValueError(f"law family {family.name!r}: --plot but no plot function to draw it")
    if family.options is not None:
        known_fields = {f.name for f in dataclasses.fields(family.options)} | CLI_FIELDS | TABLE_FIELDS
        for field, flag in fields.items():
            if field not in known_fields:
                raise ValueError(
                    f"law family {family.name!r}: {flag} sets {field!r}, which "
                    f"{family.options.__name__} has no field for"
                )
    FAMILIES[family.name] = family
    return family


def unregister(name: str) -> None:
    FAMILIES.pop(name, None)


def options_from(cls: type[Opts], args: argparse.Namespace, **extra: Any) -> Opts:
    """A law's typed options (a dataclass) from parsed arguments: each field a flag set, plus `extra`."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kw = {k: v for k, v in vars(args).items() if k in names}
    return cls(**(kw | extra))
