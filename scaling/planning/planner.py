"""How a law's fit records enter `make_plan` (`scalelab plan`): a Planner, registered once under its law
family's name, the way a family's `predict` is registered with the family.

    PLANNER = register_planner(Planner(
        law="toy",                                   # the registered family (scalelab fit toy) it plans from
        apply=plan_toy,                              # (draft, records of that law) -> None: adds to draft.out
    ))

One law allocates (`allocates=True`: Chinchilla): its records are required, its `apply` sets the plan's
compute-optimal N_opt and D_opt and the run to train, and its `finish` (after every other law, once the
warnings are final) writes what judges the whole plan (the verdict). The other laws then add to the plan at
that run, in `scaling.fits.families.families()` order (batch-lr's lr and batch before critical-batch compares
that batch with B_crit); a law none of whose records was given adds its `missing` warning, if it has one.

Two other kinds of law answer `scalelab plan` through the same object, so that the command branches on no law's name:
a law whose records feed an option of their own (`given_with="--accuracy"`: the accuracy chain's fits, refused
among the --fit records and left out of `make_plan`), and a law that plans on its own (`alone`: MoE's
(N_active, E, G, D) plan), to which `scalelab plan` hands every record and its parsed options instead of
calling `make_plan`; its `format` is the plan's text. Neither has an `apply`.

The planners live here, in scaling/planning/, and not on the `LawFamily` object: scaling.fits sits below
scaling.planning (pyproject.toml's import-linter layers), while a planner needs the planning code (the run's
model, the verdict). The built-in ones are registered by importing scaling.planning.planners.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scaling.planning.verdict import IDENTIFIED_SPAN


@dataclass
class PlanDraft:
    """The plan being built for one budget, handed to each law's planner in turn."""

    compute: float
    ci: float
    fits: list  # every fit record given, in order
    warnings: list[str]  # the plan's warnings so far (the fits' own first)
    vocab_size: int | None = None
    compute_kind: str | None = None
    unique_tokens: float | None = None
    presets_only: bool = False
    shape_rule: str | None = None
    identified_span: float = IDENTIFIED_SPAN  # the verdict's widest span of an identified N_opt
    out: dict = field(default_factory=dict)  # the plan's keys, in the order they are written
    state: dict = field(default_factory=dict)  # what the allocating planner keeps for its `finish`

    def records(self, law: str) -> list:
        """The given records of `law`, in the order given."""
        return [f for f in self.fits if f["law"] == law]


@dataclass(frozen=True)
class Planner:
    """What `scalelab plan` does with one law's records."""

    law: str  # the law family's name (the records' `law`)
    apply: Callable[[PlanDraft, list], None] | None = None  # (draft, this law's records, never empty) -> None
    allocates: bool = False  # sets N_opt, D_opt and the run: its records are required
    missing: str | None = None  # the plan's warning when no record of this law is given
    finish: Callable[[PlanDraft], None] | None = None  # the allocating law's last word, after all the others
    # the allocating law's record that plans among its records (also what the inference, cost and accuracy
    # sections read); default: the first
    lead: Callable[[list], Any] | None = None
    given_with: str | None = None  # the `scalelab plan` option its records come through instead of --fit
    # (records, the parsed `scalelab plan` options) -> the plan: a law that plans alone, emitting --emit-config
    alone: Callable[[list, Any], Any] | None = None
    format: Callable[[Any], str] | None = None  # an `alone` plan's text (without --json)


PLANNERS: dict[str, Planner] = {}


def register_planner(planner: Planner) -> Planner:
    """Plan `planner.law`'s records (once: a second planner for the same law is refused)."""
    if (planner.apply is None) != (planner.alone is not None or planner.given_with is not None):
        raise ValueError(f"the {planner.law!r} planner: give `apply`, or (with no apply) `alone` or `given_with`")
    known = PLANNERS.get(planner.law)
    if known is not None and known is not planner:
        raise ValueError(f"a planner for the {planner.law!r} law is registered already")
    PLANNERS[planner.law] = planner
    return planner


def unregister_planner(law: str) -> None:
    PLANNERS.pop(law, None)


def samples(rec: Any, keys) -> dict | None:
    """The record's bootstrap draws of `keys` as float arrays of one length (None marks a failed draw: NaN),
    or None when it has no draws of them."""
    s = (rec.get("bootstrap") or {}).get("samples") or {}
    if all(k in s for k in keys):
        n = min(len(s[k]) for k in keys)
        return {k: np.asarray([np.nan if v is None else v for v in s[k][:n]], dtype=float) for k in keys}
    return None
