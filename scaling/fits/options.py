"""The options every fit shares, typed and checked before any work (light: the law families'
`scalelab fit` flags are declared beside them and `scalelab --help` imports them)."""

from __future__ import annotations

from dataclasses import dataclass

from scaling.core.errors import InputError

HOLDOUT_RULES = ("largest",)


@dataclass(frozen=True)
class FitOptions:
    """The settings every fit shares (stored in the record's `settings` by each fitter)."""

    bootstrap: int = 0
    seed: int = 0
    ci: float = 0.95
    holdout: str | None = None

    def check(self) -> FitOptions:
        """Refuse bad shared options before any work, naming the option and what is allowed."""
        if self.holdout is not None and self.holdout not in HOLDOUT_RULES:
            raise InputError(f"--holdout must be 'largest' (got {self.holdout!r})")
        if self.bootstrap < 0:
            raise InputError(f"--bootstrap must be >= 0 (got {self.bootstrap})")
        if not 0 < self.ci < 1:
            raise InputError(f"--ci must be between 0 and 1 (got {self.ci})")
        return self
