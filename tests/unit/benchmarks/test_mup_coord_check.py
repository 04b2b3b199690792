"""benchmarks/mup_coord_check.py on small widths (32, 64, 128): after a few AdamW steps, every layer's
activation RMS stays within a factor 2.5 across widths under mup and grows by more than 10x under sp."""

from __future__ import annotations

import pytest

from tests.helpers import load_script

WIDTHS = [32, 64, 128]


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/mup_coord_check.py")


def test_flat_under_mup_growing_under_sp(bench):
    # 16 token ids: each appears ~64 times per batch, so the inputs share the structure the updates align with
    batches = bench.random_batches(16)
    mup = bench.growth(bench.coord_check(WIDTHS, "mup", 5, 1e-2, 32, batches, 16))
    sp = bench.growth(bench.coord_check(WIDTHS, "sp", 5, 1e-2, 32, batches, 16))
    assert set(mup) == {"embed", "attn0", "mlp0", "block0", "attn1", "mlp1", "block1", "logits"}
    assert all(1 / 2.5 < r < 2.5 for r in mup.values()), mup
    assert min(sp[k] for k in ("attn0", "mlp0", "block0", "attn1", "mlp1", "block1")) > 10, sp
    assert sp["logits"] > 2 * mup["logits"]


def test_base_width_is_sp(bench):
    """At the base width mup is sp: the same numbers, to the bit."""
    batches = bench.random_batches(16)
    assert bench.coord_check([32], "mup", 2, 1e-2, 32, batches, 16) == bench.coord_check(
        [32], "sp", 2, 1e-2, 32, batches, 16
    )


def test_widths_must_suit_four_heads(bench, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--widths", "32,36", "--png", ""])
    assert e.value.code == 2 and "--widths" in capsys.readouterr().err
