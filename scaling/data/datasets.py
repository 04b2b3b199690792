"""Locating published data sets (read in place, never copied into the repository).

Data root: $SCALELAB_DATA_ROOT, else ../shared/data beside the project checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

from scaling.core.errors import InputError
from scaling.core.selection import drop_highest

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # scaling/<subpackage>/<module>.py
EPOCH_RELPATH = "scaling/epoch_chinchilla_svg_extracted.csv"
EPOCH_ORIGIN = (
    "Epoch AI's reconstruction of Chinchilla Figure 4 (Besiroglu et al. 2024), file data/svg_extracted_data.csv "
    "in github.com/epoch-research/analyzing-chinchilla"
)


def data_root() -> Path:
    env = os.environ.get("SCALELAB_DATA_ROOT")
    return Path(env) if env else PROJECT_ROOT.parent / "shared" / "data"


def epoch_chinchilla_path() -> Path:
    p = data_root() / EPOCH_RELPATH
    if not p.exists():
        raise InputError(
            f"Epoch Chinchilla data not found at {p}; set SCALELAB_DATA_ROOT or fetch it from {EPOCH_ORIGIN}"
        )
    return p


def load_epoch_chinchilla(drop_highest_k: int = 0):
    """Epoch's 245 points as a canonical table: N = Model Size, flops = Training FLOP,
    D = flops / (6 N), loss. Epoch's analysis drops the 5 highest-loss points (240 remain)."""
    import pandas as pd  # deferred: pandas is slow to import

    raw = pd.read_csv(epoch_chinchilla_path())
    df = pd.DataFrame(
        {
            "N": raw["Model Size"].astype(float),
            "flops": raw["Training FLOP"].astype(float),
            "loss": raw["loss"].astype(float),
        }
    )
    df["D"] = df["flops"] / (6.0 * df["N"])
    return drop_highest(df[["N", "D", "flops", "loss"]], drop_highest_k)
