"""benchmarks/suite_time.py's readers: pytest's summary line, the slowest tests of a junit XML (xdist's group
suffix dropped), the assert count of a tree."""

from __future__ import annotations

import importlib.util

import pytest

from tests.helpers import REPO


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("suite_time", REPO / "benchmarks" / "suite_time.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_last_pytest_summary_line_is_read(bench):
    log = "1 passed in 0.50s\n...\n1012 passed, 1 skipped, 141 warnings in 1372.47s (0:22:52)\nslurm_down: stopped\n"
    assert bench.pytest_summary(log) == (1012, 1, 1372.47)
    assert bench.pytest_summary("812 passed, 10 warnings in 2384.65s (0:39:44)") == (812, 0, 2384.65)
    assert bench.pytest_summary("make: *** [Makefile:24: test] Error 143") is None


def test_slowest_tests_from_junit_without_the_group_suffix(bench, tmp_path):
    junit = tmp_path / "j.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.a" name="test_x@slurm" time="3.5"/>'
        '<testcase classname="tests.b" name="test_y[moe]" time="12.0"/>'
        '<testcase classname="tests.a" name="test_z" time="0.1"/>'
        "</testsuite></testsuites>"
    )
    assert bench.slowest(junit, k=2) == [(12.0, "tests.b::test_y[moe]"), (3.5, "tests.a::test_x")]


def test_asserts_are_counted_per_statement(bench, tmp_path):
    (tmp_path / "tests/unit").mkdir(parents=True)
    (tmp_path / "tests/unit/test_a.py").write_text("def test_a():\n    assert 1\n    x = 'assert '\n    assert x\n")
    (tmp_path / "tests/test_b.py").write_text("assert True\n# assert in a comment is not counted\n")
    assert bench.count_asserts(tmp_path) == 3
