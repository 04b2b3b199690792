"""`scalelab predict FIT.json DATA` (and `scaling.predict`): what a fitted law predicts at new points, against
what was measured.

The record's law family predicts (scaling.fits.family.LawFamily.predict, registered with the family): loss
from a Chinchilla approach-3 record (plain or data-constrained), Kaplan, MoE (Krajewski, Clark) and task-loss
records; accuracy from an accuracy record; the optimal lr and batch from a batch/LR record. Loss curves are
`predict-curve`'s. A new law that predicts adds its `predict` to its family, nothing here.

DATA is a table or a run-directory tree, read as the family's fit reads it, with the record's conventions.
The interval, the measured comparison and the extrapolation factor are scaling.fits.prediction's.
"""

from __future__ import annotations

from scaling.core.errors import InputError
from scaling.fits.families import families
from scaling.fits.prediction import Prediction

__all__ = ["Prediction", "predict"]


def predict(rec, data, columns: list[str] | None = None, *, ci: float = 0.95, seed: int = 0) -> Prediction:
    """Predictions of `rec` (a FitRecord) at the rows of `data` (table path, DataFrame or run tree);
    `columns`: --col ROLE=COLUMN items. InputError (exit 2) when the record and the data do not match."""
    if not 0 < ci < 1:
        raise InputError(f"--ci must be between 0 and 1 (got {ci})")
    law = rec.get("law")
    if rec.get("by"):
        raise InputError(
            f"a {law} --by {rec['by']} record holds one law per value: predict with the record of one value's runs"
        )
    known = families()
    family = next((f for f in known if f.name == law), None)
    if family is None or family.predict is None:
        able = ", ".join(f.name for f in known if f.predict is not None)
        raise InputError(f"predict does not handle {law!r} fits (it handles {able} fits)")
    return family.predict(rec, data, columns, ci, seed)
