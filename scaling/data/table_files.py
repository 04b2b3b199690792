"""Reading a user's table file: one reader for every fit that takes a CSV, TSV or Parquet table,
so each says the same thing about a missing, unsupported or malformed file (exit 2, no traceback)."""

from __future__ import annotations

from pathlib import Path

from scaling.core.errors import InputError

SEPARATORS = {".csv": ",", ".txt": ",", ".tsv": "\t", ".parquet": None, ".pq": None}


def read_table(path: str | Path):
    """The file as a DataFrame; InputError for a missing file, an unsupported suffix or a file
    pandas cannot read."""
    import pandas as pd  # deferred: pandas is slow to import

    p = Path(path)
    if not p.exists():
        raise InputError(f"data not found: {p}")
    suffix = p.suffix.lower()
    if suffix not in SEPARATORS:
        raise InputError(f"{p}: unsupported data file type '{p.suffix}' (use .csv, .tsv, .parquet or a run directory)")
    try:
        if SEPARATORS[suffix] is None:
            return pd.read_parquet(p)
        return pd.read_csv(p, sep=SEPARATORS[suffix])
    except Exception as exc:  # pandas and pyarrow raise many types for malformed files
        raise InputError(f"{p}: cannot read the table: {exc}") from None
