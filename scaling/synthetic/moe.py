"""SYNTHETIC MoE runs drawn from a stated law: for tests, demos and checking the fits -- never results.

`krajewski_table` draws a Krajewski et al. design (sizes x tokens per parameter x granularities at
one expansion rate, plus dense runs at G = 1); `clark_table` a Clark et al. design (sizes x expert
counts at one token count). Loss = law * exp(noise * z), deterministic given the seed. Columns
N (active non-embedding parameters), D, G, E, top_k, loss: the table `scalelab fit moe` reads.
"""

from __future__ import annotations

import numpy as np

from scaling.laws.moe import CLARK_2022_SBASE, KRAJEWSKI_2024, ClarkLaw, KrajewskiLaw


def krajewski_table(
    law: KrajewskiLaw = KRAJEWSKI_2024,
    *,
    sizes=(1e8, 2.5e8, 6e8, 1.5e9, 4e9),
    tokens_per_param=(4.0, 16.0, 64.0),
    granularities=(1, 2, 4, 8, 16),
    expansion: int = 8,
    dense: bool = True,
    noise: float = 0.0,
    seed: int = 0,
):
    """Every (N, D = N * r, G) of the grid as an MoE run with E = expansion * G experts and top_k =
    G (active FFN = one dense FFN); `dense` adds E = 1, G = 1 runs at every (N, D)."""
    import pandas as pd  # deferred: pandas is slow to import

    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        for r in tokens_per_param:
            shapes = [(expansion * g, g, g) for g in granularities] + ([(1, 1, 1)] if dense else [])
            for e, g, k in shapes:
                rows.append({"N": float(n), "D": float(n * r), "G": float(g), "E": int(e), "top_k": int(k)})
    for row in rows:
        row["loss"] = float(law.predict(row["N"], row["D"], row["G"]) * np.exp(noise * rng.standard_normal()))
    return pd.DataFrame(rows)


def clark_table(
    law: ClarkLaw = CLARK_2022_SBASE,
    *,
    sizes=(1.5e7, 5e7, 1.5e8, 5e8, 1.5e9),
    experts=(1, 4, 16, 64, 256),
    tokens: float = 1.3e11,
    noise: float = 0.0,
    seed: int = 0,
):
    """Every (N, E) of the grid at one token count (Clark et al. trained every model on 130B tokens)."""
    import pandas as pd  # deferred: pandas is slow to import

    rng = np.random.default_rng(seed)
    rows = [{"N": float(n), "D": float(tokens), "G": 1.0, "E": int(e), "top_k": 1} for n in sizes for e in experts]
    for row in rows:
        row["loss"] = float(law.predict(row["N"], row["E"]) * np.exp(noise * rng.standard_normal()))
    return pd.DataFrame(rows)
