"""Loss laws as small objects: parameters, their meaning, and `predict` (Chinchilla, data-constrained,
compute-optimal frontier, Kaplan).

Units: N parameters (the record says which kind), D tokens, C training FLOPs (C ~ 6 N D),
batch sizes in tokens, loss in nats. All functions accept numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaling.core.conventions import TokenCost
from scaling.laws.allocation import allocate


@dataclass(frozen=True)
class ChinchillaLaw:
    """L(N, D) = E + A / N^alpha + B / D^beta (Hoffmann et al. 2022, Approach 3).

    E: irreducible loss; A, alpha: model-size term; B, beta: data term.
    Minimising L under C = 6 N D gives N_opt = G (C/6)^a, D_opt = (C/6)^b / G with
    a = beta/(alpha+beta), b = alpha/(alpha+beta), G = (alpha A / (beta B))^(1/(alpha+beta)).
    """

    E: float
    A: float
    B: float
    alpha: float
    beta: float

    def predict(self, N, D):
        N, D = np.asarray(N, dtype=float), np.asarray(D, dtype=float)
        return self.E + self.A / N**self.alpha + self.B / D**self.beta

    @property
    def a(self) -> float:
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def G(self) -> float:
        return (self.alpha * self.A / (self.beta * self.B)) ** (1.0 / (self.alpha + self.beta))

    def compute_optimal(self, C):
        """(N_opt, D_opt) for compute C under C = 6 N D."""
        C = np.asarray(C, dtype=float)
        return self.G * (C / 6.0) ** self.a, (C / 6.0) ** self.b / self.G

    def optimal_loss(self, C):
        n, d = self.compute_optimal(C)
        return self.predict(n, d)


@dataclass(frozen=True)
class DataConstrainedLaw(ChinchillaLaw):
    """Muennighoff et al. 2023: Chinchilla with repeated data discounted.

    L(N, D, U) = E + A / N'^alpha + B / D'^beta, with U the unique tokens a run saw and
    D' = U + U R_D_star (1 - exp(-R_D / R_D_star)), R_D = max(D/U - 1, 0) repetitions beyond the
    first epoch: repeated tokens are worth less and less, saturating at U (1 + R_D_star).
    N' = N unless R_N_star is given (the paper's excess-parameter term): then U_N = min(N, N_opt for
    U tokens), N' = U_N + U_N R_N_star (1 - exp(-R_N / R_N_star)), R_N = N/U_N - 1 (a model larger
    than compute-optimal for its unique data, fresh data included, gets less from its extra
    parameters). With U None, or D <= U and N <= U_N everywhere, predict is the Chinchilla law's.
    compute_optimal(C) is the Chinchilla frontier (enough unique data); compute_optimal(C, U) the
    optimum with U unique tokens (numerical: few unique tokens shrink N_opt, Muennighoff et al.'s Figure 3).
    """

    R_D_star: float = float("inf")
    R_N_star: float | None = None

    @staticmethod
    def _decayed(unique, repeats, r_star):
        return unique * (1.0 - r_star * np.expm1(-repeats / r_star))

    def effective_data(self, D, U):
        """D' (tokens); a run that saw fewer tokens than U (D <= U) repeated nothing: D' = D."""
        D = np.asarray(D, dtype=float)
        U = np.minimum(np.asarray(U, dtype=float), D)
        return self._decayed(U, D / U - 1.0, self.R_D_star)

    def compute_optimal(self, C, U=None):
        """(N_opt, D_opt) under C = 6 N D: the Chinchilla frontier, or with U unique tokens the
        minimum of predict(N, C / 6N, U) over N (three decades either side of the frontier's N)."""
        if U is None:
            return super().compute_optimal(C)
        n_fresh, _ = super().compute_optimal(C)
        rng = (float(np.min(n_fresh)) / 1e3, float(np.max(n_fresh)) * 1e3)
        return allocate(lambda n, d: self.predict(n, d, U), float(C), TokenCost("6ND_total", "total"), rng)

    def predict(self, N, D, U=None):
        if U is None:
            return super().predict(N, D)
        N, D = np.asarray(N, dtype=float), np.asarray(D, dtype=float)
        n_eff = N
        if self.R_N_star is not None:  # the paper's N' (needs the unique data U)
            u = np.minimum(np.asarray(U, dtype=float), D)
            u_n = np.minimum(N, self.G * (u * self.G) ** (self.beta / self.alpha))
            n_eff = self._decayed(u_n, np.maximum(N / u_n - 1.0, 0.0), self.R_N_star)
        return self.E + self.A / n_eff**self.alpha + self.B / self.effective_data(D, U) ** self.beta


@dataclass(frozen=True)
class FrontierLaw:
    """Compute-optimal allocation from Approaches 1/2: N_opt = N_coef C^a, D_opt = D_coef C^b."""

    N_coef: float
    a: float
    D_coef: float
    b: float

    def compute_optimal(self, C):
        C = np.asarray(C, dtype=float)
        return self.N_coef * C**self.a, self.D_coef * C**self.b


@dataclass(frozen=True)
class KaplanLaw:
    """Kaplan et al. 2020 (N conventionally non-embedding parameters).

    form 'nd': L(N, D) = [(Nc/N)^(alphaN/alphaD) + Dc/D]^alphaD
    form 'n' : L(N) = (Nc/N)^alphaN   (trained to convergence)
    form 'd' : L(D) = (Dc/D)^alphaD   (large model, early stopping)
    """

    form: str
    Nc: float | None = None
    alphaN: float | None = None
    Dc: float | None = None
    alphaD: float | None = None

    def predict(self, N=None, D=None):
        if self.form == "n":
            return (self.Nc / np.asarray(N, dtype=float)) ** self.alphaN
        if self.form == "d":
            return (self.Dc / np.asarray(D, dtype=float)) ** self.alphaD
        N, D = np.asarray(N, dtype=float), np.asarray(D, dtype=float)
        return ((self.Nc / N) ** (self.alphaN / self.alphaD) + self.Dc / D) ** self.alphaD


# Published constants, for comparison plots and tests.
# Muennighoff et al. 2023 (datablations README, C4): a, b, e = 6.255414, 7.3049974, 0.6254804.
MUENNIGHOFF_2023 = DataConstrainedLaw(
    E=float(np.exp(0.6254804)),
    A=float(np.exp(6.255414)),
    B=float(np.exp(7.3049974)),
    alpha=0.3526596,
    beta=0.3526596,
    R_D_star=15.387756,
    R_N_star=5.309743,
)
HOFFMANN_2022 = ChinchillaLaw(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
EPOCH_2024 = ChinchillaLaw(E=1.8172, A=482.01, B=2085.43, alpha=0.3478, beta=0.3658)
KAPLAN_2020_ND = KaplanLaw(form="nd", Nc=6.4e13, alphaN=0.076, Dc=1.8e13, alphaD=0.103)
