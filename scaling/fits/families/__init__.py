"""The built-in law families (scaling.fits.family.LawFamily), one light module each: `scalelab fit <law>`'s
flags, what runs them and how a record predicts (the family's `predict`). MoE's and the lr-annealing law's
families sit in their fits' subpackages (scaling/fits/moe/family.py, scaling/fits/lr_annealing/family.py).

Importing this package registers all of them; `families()` lists every registered family, the built-in ones
in `BUILTIN` order (the order `scalelab fit --help` lists them), then the others as registered (a plug-in,
a test's toy law). `scalelab fit` and `scalelab predict` read the families here, nowhere else.
"""

from __future__ import annotations

from scaling.fits.families import accuracy, batch_lr, chinchilla, critical_batch, kaplan, task_loss
from scaling.fits.family import FAMILIES, LawFamily
from scaling.fits.lr_annealing import family as lr_annealing
from scaling.fits.moe import family as moe

BUILTIN = tuple(
    m.FAMILY.name for m in (chinchilla, kaplan, batch_lr, critical_batch, lr_annealing, accuracy, moe, task_loss)
)


def families() -> list[LawFamily]:
    """Every registered family: the built-in ones in BUILTIN order, then the others as registered."""
    rank = {name: i for i, name in enumerate(BUILTIN)}
    return sorted(FAMILIES.values(), key=lambda f: rank.get(f.name, len(rank)))
