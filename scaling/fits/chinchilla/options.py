"""`fit_chinchilla`'s options, typed and checked before any work (light: `scalelab --help` reads the
chinchilla family's flags beside them, scaling/fits/chinchilla/family.py)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from scaling.core.errors import InputError
from scaling.fits.options import FitOptions

FRONTIER_WEIGHTS = ("ols", "inverse-variance")  # approach 2: how the frontier regression weights budgets
TERMS = ("data+params", "data")  # --terms: the complete law (R_D_star and R_N_star) or the data term only
# The keyword names fit_chinchilla took before its options were typed (still accepted).
ALIASES = {"drop_highest_k": "drop_highest"}


@dataclass(frozen=True)
class ChinchillaOptions(FitOptions):
    """Every choice of a Chinchilla fit (approach 1, 2 or 3; the Chinchilla or data-constrained law).
    `settings` is what the record stores of them (each approach adds its own: delta, grid, method, ...).

    columns / n_kind: how a table or run tree is read (ignored for a loaded Dataset);
    compute_kind: the compute convention (default: the runs' IsoFLOP sweep's, else 6 N D with the same N);
    grid: 'fast' (vectorised grid ranking, L-BFGS-B from the best `top_k`) or 'full' (all 4500);
    bootstrap_top_k: starts per bootstrap resample; delta: the Huber delta on log residuals;
    budget_tol / n_bins: approach 2's budget grouping / approach 1's compute bins;
    at_compute: also report the optimum at these budgets (in the record's convention);
    curves: several points per run (training curves; None: detected from the data);
    objective (approach 3): 'huber' (summed Huber) or 'mle' (Huber-density likelihood, free sigma);
    law (approach 3): 'chinchilla' or 'data-constrained' (Muennighoff et al. 2023; needs column U);
    max_embedding_fraction: leave out runs whose embeddings exceed this fraction of their parameters;
    frontier_weights (approach 2): 'ols' (None: the default, the published procedure) or 'inverse-variance';
    terms (data-constrained law): 'data+params' (None: the default, the paper's complete law) or 'data'.
    """

    approach: int = 3
    drop_highest: int = 0
    holdout_fraction: float = 0.1
    columns: dict[str, str] | None = None
    n_kind: str = "total"
    compute_kind: str | None = None
    grid: str = "fast"
    top_k: int = 32
    bootstrap_top_k: int = 2
    delta: float = 1e-3
    budget_tol: float = 0.15
    n_bins: int = 20
    at_compute: list[float] | None = None
    curves: bool | None = None
    objective: str = "huber"
    law: str = "chinchilla"
    max_embedding_fraction: float | None = None
    frontier_weights: str | None = None
    terms: str | None = None

    @classmethod
    def of(cls, options: ChinchillaOptions | None = None, **kw: Any) -> ChinchillaOptions:
        """`options` (default: the defaults) with `kw` replacing fields; old keyword names accepted."""
        kw = {ALIASES.get(k, k): v for k, v in kw.items()}
        unknown = sorted(set(kw) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError(f"fit_chinchilla got unexpected keyword argument(s): {', '.join(unknown)}")
        return replace(options or cls(), **kw)

    def check(self) -> ChinchillaOptions:
        if self.approach not in (1, 2, 3):
            raise InputError(f"--approach must be 1, 2 or 3 (got {self.approach})")
        if self.objective not in ("huber", "mle"):
            raise InputError(f"--objective must be 'huber' or 'mle' (got {self.objective!r})")
        if self.law not in ("chinchilla", "data-constrained"):
            raise InputError(f"--law must be 'chinchilla' or 'data-constrained' (got {self.law!r})")
        if self.approach != 3 and (self.objective != "huber" or self.law != "chinchilla"):
            opt = f"--objective {self.objective}" if self.objective != "huber" else f"--law {self.law}"
            raise InputError(f"{opt} applies to approach 3 only (got --approach {self.approach})")
        if self.grid not in ("fast", "full"):
            raise InputError(f"grid must be 'fast' or 'full' (got {self.grid!r})")
        if self.frontier_weights is not None:
            if self.frontier_weights not in FRONTIER_WEIGHTS:
                raise InputError(
                    f"--frontier-weights must be one of {', '.join(FRONTIER_WEIGHTS)} (got {self.frontier_weights!r})"
                )
            if self.approach != 2:
                raise InputError(f"--frontier-weights applies to approach 2 only (got --approach {self.approach})")
        if self.terms is not None:
            if self.terms not in TERMS:
                raise InputError(f"--terms must be one of {', '.join(TERMS)} (got {self.terms!r})")
            if self.law != "data-constrained":
                raise InputError("--terms applies to --law data-constrained only")
        super().check()
        return self

    def settings(self, curves: bool) -> dict:
        return {
            "approach": self.approach,
            "drop_highest": self.drop_highest,
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            "ci": self.ci,
            "holdout": self.holdout,
            "holdout_fraction": self.holdout_fraction if self.holdout else None,
            "curves": bool(curves),
            "max_embedding_fraction": self.max_embedding_fraction,
        }
