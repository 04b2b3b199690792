"""CI fails when Slurm, Chromium or the two-node cluster could not be started; a developer skips them."""

from __future__ import annotations

import pytest

from tests.helpers import REPO
from tests.helpers.ci_gate import ENV, unavailable


def test_missing_service_skips_for_a_developer(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="sbatch not installed"):
        unavailable("slurm", "sbatch not installed")


@pytest.mark.parametrize("value", ["slurm,browser", "browser", "all"])
def test_missing_service_fails_when_required(monkeypatch, value):
    monkeypatch.setenv(ENV, value)
    with pytest.raises(pytest.fail.Exception, match="browser required .* no chromium"):
        unavailable("browser", "no chromium")


def test_only_the_required_service_fails(monkeypatch):
    monkeypatch.setenv(ENV, "browser")
    with pytest.raises(pytest.skip.Exception):
        unavailable("slurm", "no sinfo")


def test_ci_script_requires_every_service():
    text = (REPO / ".ci/run").read_text()
    assert "SCALELAB_REQUIRE=${SCALELAB_REQUIRE:-slurm,browser,multinode}" in text
    # the two-node cluster is brought up, its conf handed to the tests, and torn down on exit
    assert "bash .ci/cluster_up.sh" in text and "SCALELAB_MULTINODE_CONF" in text
    assert "bash .ci/cluster_down.sh" in text.split("trap", 2)[-1]
