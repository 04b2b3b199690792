"""Scaling laws as small objects: parameters, their meaning, and `predict`.

Units: N parameters (the record says which kind), D tokens, C training FLOPs (C ~ 6 N D),
batch sizes in tokens, loss in nats. All functions accept numpy arrays.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from scaling.conventions import TokenCost
from scaling.frontier import allocate


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
# Muennighoff et al. 2023 (datablations README, C4): a, b, e = 6.255414, 7.3049974, 0.6254804.
MUENNIGHOFF_2023 = DataConstrainedLaw(E=float(np.exp(0.6254804)), A=float(np.exp(6.255414)), B=float(np.exp(7.3049974)), alpha=0.3526596,
                                      beta=0.3526596, R_D_star=15.387756, R_N_star=5.309743)
HOFFMANN_2022 = ChinchillaLaw(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
EPOCH_2024 = ChinchillaLaw(E=1.8172, A=482.01, B=2085.43, alpha=0.3478, beta=0.3658)
KAPLAN_2020_ND = KaplanLaw(form="nd", Nc=6.4e13, alphaN=0.076, Dc=1.8e13, alphaD=0.103)
KAPLAN_2020_BCRIT = CriticalBatchLaw(B_star=2e8, alphaB=0.21)
DEEPSEEK_2024 = ComputeHParamLaw(lr_coef=0.3118, lr_exp_C=-0.1250, bs_coef=0.2920, bs_exp_C=0.3271)
STEP_LAW_2025 = NDHParamLaw(lr_coef=1.79, lr_exp_N=-0.713, lr_exp_D=0.307, bs_coef=0.58, bs_exp_D=0.571)


def _pick(params: dict, cls) -> dict:
    names = [f for f in cls.__dataclass_fields__ if f != "form"]
    return {k: params.get(k) for k in names}


def from_record(rec) -> object:
    """The law object for a fit record's point estimate."""
    law, p = rec["law"], rec["params"]
    if law == "chinchilla":
        if rec.get("approach") in (1, 2):
            return FrontierLaw(**_pick(p, FrontierLaw))
        if (rec.get("settings") or {}).get("law") == "data-constrained":
            return DataConstrainedLaw(**_pick(p, DataConstrainedLaw))
        return ChinchillaLaw(**_pick(p, ChinchillaLaw))
    if law == "kaplan":
        return KaplanLaw(form=rec.get("settings", {}).get("form", "nd"), **_pick(p, KaplanLaw))
    if law == "batch-lr":
        if rec.get("settings", {}).get("form") == "nd":
            return NDHParamLaw(**_pick(p, NDHParamLaw))
        return ComputeHParamLaw(**_pick(p, ComputeHParamLaw))
    if law == "critical-batch":
        return PowerLaw(coef=p["bcrit_coef"], exp=p["bcrit_exp_N"])
    if law == "moe":  # Krajewski's L(N, D, G) or Clark's L(N, E): scaling.moe_laws
        from scaling.moe_laws import law_from_params

        return law_from_params((rec.get("settings") or {}).get("law", "krajewski"), p)
    if law == "lr-annealing":
        from scaling.lr_annealing_law import law_from_record

        return law_from_record(rec)
    raise ValueError(f"unknown law '{law}'")


def as_dict(law) -> dict:
    return asdict(law)
