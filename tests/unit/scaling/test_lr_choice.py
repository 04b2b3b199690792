"""The lr an lr sweep chooses: a parabola's vertex in log lr, else the best grid point with a warning."""

from __future__ import annotations

import math

import pytest

from scaling.fits.lr_choice import choose_lr

LRS = [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]


def parabola(lr_opt: float, lrs=LRS, a: float = 0.05, floor: float = 3.0) -> list[float]:
    return [floor + a * math.log(lr / lr_opt) ** 2 for lr in lrs]


def test_vertex_recovers_an_off_grid_optimum():
    got = choose_lr(LRS, parabola(5.5e-3))  # between grid points 4e-3 and 8e-3
    assert got["method"] == "vertex" and got["warning"] is None
    assert got["lr"] == pytest.approx(5.5e-3, rel=1e-9) and got["best_lr"] == 4e-3
    a, b, _ = got["coef"]
    assert a == pytest.approx(0.05) and math.exp(-b / (2 * a)) == pytest.approx(5.5e-3)


def test_the_parabola_is_local_to_the_best_point():
    # a steep rise past the optimum (a diverging largest lr) must not pull the vertex away from it
    losses = parabola(5.5e-3)
    losses[-1] = 9.0
    got = choose_lr(LRS, losses)
    assert got["method"] == "vertex" and got["lr"] == pytest.approx(5.5e-3, rel=1e-9)


def test_vertex_outside_the_grid_takes_the_best_point_and_says_which_way():
    got = choose_lr(LRS, parabola(5e-2))
    assert got["method"] == "best" and got["lr"] == 1.6e-2
    assert got["vertex_lr"] == pytest.approx(5e-2) and "above the grid's largest lr 0.016" in got["warning"]
    low = choose_lr(LRS, parabola(2e-4))
    assert low["lr"] == 1e-3 and "below the grid's smallest lr 0.001" in low["warning"]


def test_downward_parabola_takes_the_best_point():
    # a hump: losses rise towards the middle of the grid
    hump = [2.9, 3.1, 3.2, 3.1, 2.8]
    got = choose_lr(LRS, hump)
    assert got["method"] == "best" and got["lr"] == 1.6e-2 and "opens downward" in got["warning"]


def test_failed_runs_are_left_out_and_named():
    losses = parabola(3e-3)
    losses[-1] = float("nan")  # diverged at the largest lr
    got = choose_lr(LRS, losses)
    assert got["method"] == "vertex" and got["lr"] == pytest.approx(3e-3)
    assert "left out 1 lr(s) without a finite loss (0.016)" in got["warning"]
    two = choose_lr(LRS[:3], [3.0, None, 2.9])
    assert two["method"] == "best" and two["lr"] == 4e-3 and "too few for a parabola" in two["warning"]


def test_nothing_finite_is_an_error():
    with pytest.raises(ValueError, match="no run of the lr sweep has a finite final loss"):
        choose_lr(LRS[:2], [None, float("inf")])
