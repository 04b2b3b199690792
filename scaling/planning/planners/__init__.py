"""The built-in laws' planners (scaling.planning.planner.Planner), one module each: Chinchilla allocates the
budget and chooses the run, batch-lr sets its lr and batch, critical-batch its B_crit; the accuracy chain's
laws come through options of their own (chain.py) and MoE plans alone (moe.py).

Importing this package registers them; `planners()` lists every registered planner whose law family is
registered, in `scaling.fits.families.families()` order (the order they add to a plan). `make_plan`,
`build_plan` and `scalelab plan` read the planners here, nowhere else: none of them branches on a law's name.
"""

from __future__ import annotations

from typing import Any

from scaling.core.errors import InputError
from scaling.fits.families import families
from scaling.planning.planner import PLANNERS, Planner
from scaling.planning.planners import batch_lr, chain, chinchilla, critical_batch, moe

BUILTIN = tuple(
    p.law for p in (chinchilla.PLANNER, batch_lr.PLANNER, critical_batch.PLANNER, *chain.PLANNERS, moe.PLANNER)
)


def planners() -> list[Planner]:
    """Every registered planner of a registered law family, in the families' order."""
    return [PLANNERS[f.name] for f in families() if f.name in PLANNERS]


def alone(fits: list) -> Planner | None:
    """The planner of a law that plans alone (`Planner.alone`: MoE) when one of its records is given."""
    laws = {f["law"] for f in fits}
    return next((p for p in planners() if p.alone is not None and p.law in laws), None)


def refuse_other_options(fits: list) -> None:
    """InputError for a record given with --fit whose law has an option of its own (`Planner.given_with`)."""
    own = {p.law: p.given_with for p in planners() if p.given_with}
    for f in fits:
        if f["law"] in own:
            raise InputError(
                f"a {f['law']} fit is not an allocation law: give it with {own[f['law']]} instead of --fit"
            )


def allocation(fits: list) -> tuple[list, Any]:
    """(the given records of the allocating law, the one that plans: `Planner.lead`), ([], None) with none."""
    for p in planners():
        if p.allocates:
            records = [f for f in fits if f["law"] == p.law]
            if records:
                return records, (p.lead(records) if p.lead else records[0])
    return [], None


def one_allocation_record(fits: list) -> Any:
    """The one record of the allocating law (a plan for inference tokens reads one law), or InputError."""
    records, _ = allocation(fits)
    if len(records) != 1:
        allocating = [p.law for p in planners() if p.allocates]
        law = records[0]["law"] if records else " or ".join(allocating)
        cmd = records[0]["law"] if records else allocating[0]
        raise InputError(f"plan needs exactly one {law} fit record (--fit F.json from `scalelab fit {cmd}`)")
    return records[0]
