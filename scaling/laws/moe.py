"""MoE scaling laws as objects: Krajewski et al. 2024 (granularity) and Clark et al. 2022 (experts).

Krajewski et al. 2024, "Scaling Laws for Fine-Grained Mixture of Experts" (ICML 2024, Eq. 9):

    L(N, D, G) = c + (g / G^gamma + a) / N^alpha + b / D^beta

N = active non-embedding parameters, D = training tokens, G = granularity (dense d_ff / expert
d_ff), at one expansion rate (routed expert parameters / dense FFN; the paper fixes 64 and varies
G in 1..16). Their Table 1: a = 18.1, alpha = 0.115, b = 30.8, beta = 0.147, g = 2.1, gamma = 0.58,
c = 0.47 (MoE); the dense Transformer is fitted separately: a = 16.3, alpha = 0.126, b = 26.7,
beta = 0.127, c = 0.47. At fixed G it is Chinchilla's law with A = g / G^gamma + a, so the
compute-optimal (N, D) under C = 6 N D is Chinchilla's closed form.

Clark et al. 2022, "Unified Scaling Laws for Routed Language Models" (ICML 2022, Eq. 1):

    log10 L = a log10 N + b log10 E + c log10 N log10 E + d

E = routed experts, N = dense-equivalent (active) parameters, every run trained on the same
tokens (130B): the law has no data term. Logs are base 10 as in the paper (c and d depend on the
base; a and b do not). Their Table 3 for S-BASE: a = -0.082, b = -0.108, c = 0.009, d = 1.104
(with their saturating transform of E, E_start = 1.847, E_max = 314.478, which is not fitted here:
E enters as it is). b + c log10 N is the gain per decade of experts, zero at N_cutoff = 10^(-b/c).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaling.laws.loss import ChinchillaLaw


def _num(v, default: float = 0.0):
    """A parameter, with None (not identified) read as `default`; arrays (bootstrap draws) pass through."""
    return default if v is None else v


@dataclass(frozen=True)
class KrajewskiLaw:
    """L(N, D, G) = c + (g / G^gamma + a) / N^alpha + b / D^beta (gamma None: not identified, g = 0)."""

    c: float
    g: float
    gamma: float | None
    a: float
    alpha: float
    b: float
    beta: float

    def n_coef(self, G=1.0):
        """The N-term's coefficient at granularity G: g / G^gamma + a."""
        G = np.asarray(G, dtype=float)
        return self.g / G ** _num(self.gamma) + self.a

    def predict(self, N, D, G=1.0):
        N, D = np.asarray(N, dtype=float), np.asarray(D, dtype=float)
        return self.c + self.n_coef(G) / N**self.alpha + self.b / D**self.beta

    def at(self, G: float) -> ChinchillaLaw:
        """The Chinchilla law this one is at fixed granularity G (E = c, A = g/G^gamma + a, B = b)."""
        return ChinchillaLaw(E=self.c, A=self.n_coef(G), B=self.b, alpha=self.alpha, beta=self.beta)

    def compute_optimal(self, C, G=1.0):
        """(N_opt, D_opt) under C = 6 N D at granularity G."""
        return self.at(G).compute_optimal(C)

    def optimal_loss(self, C, G=1.0):
        return self.at(G).optimal_loss(C)


@dataclass(frozen=True)
class ClarkLaw:
    """log10 L = a log10 N + b log10 E + c log10 N log10 E + d (b, c None: not identified, read as 0)."""

    a: float
    b: float | None
    c: float | None
    d: float

    def log10_loss(self, N, E=1.0):
        lN, lE = np.log10(np.asarray(N, dtype=float)), np.log10(np.asarray(E, dtype=float))
        return self.a * lN + _num(self.b) * lE + _num(self.c) * lN * lE + self.d

    def predict(self, N, E=1.0, D=None):
        """Loss at N active parameters and E experts (D is accepted and ignored: no data term)."""
        return 10.0 ** self.log10_loss(N, E)

    def effective_params(self, N, E):
        """Clark's effective parameter count: the dense (E = 1) size with the same loss."""
        return 10.0 ** ((self.log10_loss(N, E) - self.d) / self.a)

    @property
    def cutoff_N(self) -> float | None:
        """The size beyond which more experts stop helping (b + c log10 N = 0), when the law has one."""
        b, c = _num(self.b), _num(self.c)
        if c > 0 and b < 0:
            return float(10.0 ** (-b / c))
        return None


# Published constants (see the module docstring), for comparison and synthetic tests.
KRAJEWSKI_2024 = KrajewskiLaw(c=0.47, g=2.1, gamma=0.58, a=18.1, alpha=0.115, b=30.8, beta=0.147)
KRAJEWSKI_2024_DENSE = ChinchillaLaw(E=0.47, A=16.3, B=26.7, alpha=0.126, beta=0.127)
CLARK_2022_SBASE = ClarkLaw(a=-0.082, b=-0.108, c=0.009, d=1.104)

KRAJEWSKI_PARAMS = ("c", "g", "gamma", "a", "alpha", "b", "beta")
CLARK_PARAMS = ("a", "b", "c", "d")
LAWS = ("krajewski", "clark")


def law_from_params(law: str, params: dict):
    """The law object of a record's `params` (`law` = settings.law: krajewski or clark)."""
    if law == "clark":
        return ClarkLaw(**{k: params.get(k) for k in CLARK_PARAMS})
    return KrajewskiLaw(**{k: params.get(k) for k in KRAJEWSKI_PARAMS})


def law_from_samples(law: str, samples: dict, n: int | None = None):
    """One vectorised law over bootstrap draws (each parameter an array, not-identified ones 0)."""
    names = CLARK_PARAMS if law == "clark" else KRAJEWSKI_PARAMS
    k = n if n is not None else min(len(v) for v in samples.values())
    arr = {
        p: np.asarray([np.nan if v is None else v for v in samples[p][:k]], dtype=float)
        if p in samples
        else np.zeros(k)
        for p in names
    }
    return law_from_params(law, arr)
