"""`scalelab fit chinchilla|batch-lr DATA --by KEY`: one law per value, and the compute multiplier
between Chinchilla laws checked against a synthetic truth whose multiplier is known analytically
(the other optimizer's tokens are worth k of the baseline's: L_other(N, D) = L_base(N, k D), so
C_base(L) / C_other(L) = k at every scale)."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.core.conventions import TokenCost
from scaling.laws import multiplier as compare
from scaling.synthetic.runs import TRUE_CHINCHILLA, data_multiplied

K = 2.0


CORE = ("E", "A", "B", "alpha", "beta")


def _p(law):
    return {k: getattr(law, k) for k in CORE}


def test_multiplier_is_k_at_every_scale_exact_and_numeric():
    base, other = _p(TRUE_CHINCHILLA), _p(data_multiplied(TRUE_CHINCHILLA, K))
    exact = TokenCost("6ND_total", "total")
    # trainer FLOPs: k(N) = C / D not 6 N (attention adds per-token FLOPs): solved numerically
    N = np.geomspace(1e6, 1e9, 5)
    numeric = TokenCost("trainer_flops", "total", tuple(np.log(N)), tuple(np.log(6 * N + 2e5)))
    assert not numeric.exact
    rng = (1e3, 1e13)
    for cost in (exact, numeric):
        for c in (1e17, 1e19, 1e22):
            m, L = compare.multiplier(base, other, c, cost, cost, rng, rng)
            assert m == pytest.approx(K, rel=2e-3), (cost.compute, c)
            assert L == pytest.approx(compare.optimal_loss(other, c, cost, rng), rel=1e-12)
    # a loss below the baseline's E is never reached by it
    assert compare.compute_for_loss(base, base["E"] - 0.01, exact, rng, 1e18) == float("inf")
    # different exponents: the multiplier changes with scale
    steeper = dict(other, beta=other["beta"] + 0.05)
    ms = [compare.multiplier(base, steeper, c, exact, exact, rng, rng)[0] for c in (1e17, 1e21)]
    assert abs(ms[1] / ms[0] - 1) > 0.05
