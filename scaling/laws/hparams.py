"""Hyperparameter laws as small objects: the critical batch (Kaplan et al. 2020, McCandlish et al.
2018) and the optimal learning rate and batch size (DeepSeek LLM 2024, Step Law 2025).

Units as in `scaling.laws.loss`: N parameters, D tokens, C training FLOPs, batch sizes in tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CriticalBatchLaw:
    """Kaplan's B_crit(L) = B_star / L^(1/alphaB): the critical batch (tokens) grows as loss falls."""

    B_star: float
    alphaB: float

    def predict(self, L):
        return self.B_star / np.asarray(L, dtype=float) ** (1.0 / self.alphaB)


@dataclass(frozen=True)
class StepsExamplesLaw:
    """McCandlish et al. 2018: steps S and examples (tokens) E to reach a target loss at batch B:
    S = S_min (1 + B_crit/B), E = E_min (1 + B/B_crit), B_crit = E_min / S_min."""

    S_min: float
    E_min: float

    @property
    def B_crit(self) -> float:
        return self.E_min / self.S_min

    def steps(self, B):
        return self.S_min * (1.0 + self.B_crit / np.asarray(B, dtype=float))

    def examples(self, B):
        return self.E_min * (1.0 + np.asarray(B, dtype=float) / self.B_crit)


@dataclass(frozen=True)
class PowerLaw:
    """y = coef * x^exp (used for B_crit(N) = bcrit_coef N^bcrit_exp_N and friends)."""

    coef: float
    exp: float

    def predict(self, x):
        return self.coef * np.asarray(x, dtype=float) ** self.exp


@dataclass(frozen=True)
class ComputeHParamLaw:
    """DeepSeek LLM form: lr_opt = lr_coef C^lr_exp_C, B_opt = bs_coef C^bs_exp_C (B in tokens)."""

    lr_coef: float
    lr_exp_C: float
    bs_coef: float
    bs_exp_C: float

    def predict(self, C=None, N=None, D=None):
        if C is None:
            C = 6.0 * np.asarray(N, dtype=float) * np.asarray(D, dtype=float)
        C = np.asarray(C, dtype=float)
        return self.lr_coef * C**self.lr_exp_C, self.bs_coef * C**self.bs_exp_C


@dataclass(frozen=True)
class NDHParamLaw:
    """Step Law form: lr_opt = lr_coef N^lr_exp_N D^lr_exp_D, B_opt = bs_coef D^bs_exp_D (tokens)."""

    lr_coef: float
    lr_exp_N: float
    lr_exp_D: float
    bs_coef: float
    bs_exp_D: float

    def predict(self, N=None, D=None, C=None):
        N, D = np.asarray(N, dtype=float), np.asarray(D, dtype=float)
        return self.lr_coef * N**self.lr_exp_N * D**self.lr_exp_D, self.bs_coef * D**self.bs_exp_D


# Published constants, for comparison plots and tests.
KAPLAN_2020_BCRIT = CriticalBatchLaw(B_star=2e8, alphaB=0.21)
DEEPSEEK_2024 = ComputeHParamLaw(lr_coef=0.3118, lr_exp_C=-0.1250, bs_coef=0.2920, bs_exp_C=0.3271)
STEP_LAW_2025 = NDHParamLaw(lr_coef=1.79, lr_exp_N=-0.713, lr_exp_D=0.307, bs_coef=0.58, bs_exp_D=0.571)
