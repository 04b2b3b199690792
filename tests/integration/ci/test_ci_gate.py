"""CI fails when Slurm or Chromium could not be started; a developer's run skips with the reason."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.helpers import REPO
from tests.helpers.ci_gate import ENV


def test_a_required_missing_service_fails_the_pytest_run(tmp_path):
    """End to end through pytest: the same test file passes with a skip, or fails under SCALELAB_REQUIRE."""
    (tmp_path / "test_needs.py").write_text(
        textwrap.dedent("""
        import pytest
        from tests.helpers.ci_gate import unavailable

        @pytest.fixture(scope="module")
        def cluster():
            unavailable("slurm", "no usable Slurm node")

        def test_uses_cluster(cluster):
            pass
    """)
    )

    def run(env):
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider", str(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
        )

    import os

    base = {k: v for k, v in os.environ.items() if k != ENV} | {"PYTHONPATH": str(REPO)}
    dev = run(base)
    assert dev.returncode == 0 and "SKIPPED" in dev.stdout and "no usable Slurm node" in dev.stdout
    ci = run(base | {ENV: "slurm,browser"})
    assert ci.returncode == 1 and "no usable Slurm node" in ci.stdout, ci.stdout
