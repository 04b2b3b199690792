"""The built-in laws' planners (scaling.planning.planner.Planner), one module each: Chinchilla allocates the
budget and chooses the run, batch-lr sets its lr and batch, critical-batch its B_crit.

Importing this package registers them; `planners()` lists every registered planner whose law family is
registered, in `scaling.fits.families.families()` order (the order they add to a plan). `make_plan` reads the
planners here, nowhere else.
"""

from __future__ import annotations

from scaling.fits.families import families
from scaling.planning.planner import PLANNERS, Planner
from scaling.planning.planners import batch_lr, chinchilla, critical_batch

BUILTIN = tuple(m.PLANNER.law for m in (chinchilla, batch_lr, critical_batch))


def planners() -> list[Planner]:
    """Every registered planner of a registered law family, in the families' order."""
    return [PLANNERS[f.name] for f in families() if f.name in PLANNERS]
