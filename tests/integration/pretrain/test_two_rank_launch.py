"""The two-rank test launcher (tests/helpers/ranks.py) when a launch hangs: it must say how far each
rank got and take its ranks with it, or one hang costs the suite a bare timeout and two orphans."""

from __future__ import annotations

import subprocess

import pytest

from tests.helpers import REPO, tiny_overrides
from tests.helpers import ranks as two_ranks


def test_a_launch_past_its_timeout_says_how_far_each_rank_got_and_leaves_no_rank(tiny_data, tmp_path):
    job = {"argv": [str(REPO / "configs/train/tiny.yaml"), *tiny_overrides(tiny_data), "--run-dir", "run"]}
    with pytest.raises(AssertionError) as e:
        two_ranks.launch([job], tmp_path, timeout=3)  # the ranks' start-up alone takes longer
    msg = str(e.value)
    assert "two-rank launch ran past 3 s (1 jobs)" in msg
    assert "rank 0: 0 finished (rc [])" in msg and "rank 1: 0 finished (rc [])" in msg
    assert "configs/train/tiny.yaml" in msg  # the job each rank was in
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
    assert left.stdout == "", f"processes of the launch outlived it: {left.stdout}"
