"""Skip or fail when a test's external service (Slurm, Chromium, the two-node cluster) is missing.

A developer's `make test` skips such tests with the reason shown (-ra). CI (`.ci/run`) sets
SCALELAB_REQUIRE=slurm,browser,multinode after starting them: there a missing service fails its tests, so a
broken set-up can never pass as a green run of skipped tests. SCALELAB_REQUIRE=all requires every
service."""

from __future__ import annotations

import os

import pytest

ENV = "SCALELAB_REQUIRE"
FEATURES = ("slurm", "browser", "multinode")


def required(feature: str) -> bool:
    wanted = {w.strip().lower() for w in os.environ.get(ENV, "").split(",") if w.strip()}
    return feature in wanted or "all" in wanted


def unavailable(feature: str, reason: str) -> None:
    """Call from a fixture or test when `feature` cannot be used: fails under SCALELAB_REQUIRE, else skips."""
    if feature not in FEATURES:
        raise ValueError(f"unknown feature {feature!r}: one of {', '.join(FEATURES)}")
    if required(feature):
        pytest.fail(f"{feature} required ({ENV}={os.environ.get(ENV)}) but unavailable: {reason}", pytrace=False)
    pytest.skip(reason)
