"""benchmarks/suite_time.py's readers: pytest's summary line, the slowest tests of a junit XML (xdist's group
suffix dropped), the assert count of a tree, and the time of the tests both suites ran against the new ones."""

from __future__ import annotations

import pytest

from tests.helpers import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/suite_time.py")


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


def junit(path, cases: list[tuple[str, str, float]], skipped: tuple[str, ...] = ()):
    """A junit XML of (classname, name, seconds) cases; the names in `skipped` marked skipped."""
    rows = "".join(
        f'<testcase classname="{c}" name="{n}" time="{t}">' + ("<skipped/>" if n in skipped else "") + "</testcase>"
        for c, n, t in cases
    )
    path.write_text(f'<testsuites><testsuite name="pytest">{rows}</testsuite></testsuites>')
    return path


def test_the_tests_both_suites_ran_are_timed_apart_from_the_new_ones(bench, tmp_path, capsys):
    old = junit(
        tmp_path / "old.xml",
        [
            ("tests.unit.a", "test_fit", 10.0),
            ("tests.unit.a", "test_plan", 4.0),
            ("tests.integration.b", "test_train@slurm", 20.0),  # xdist's group suffix: matched without it
            ("tests.unit.gone", "test_removed", 3.0),
            ("tests.unit.a", "test_skip", 0.0),
        ],
        skipped=("test_skip",),
    )
    new = junit(
        tmp_path / "new.xml",
        [
            ("tests.unit.a", "test_fit", 11.0),
            ("tests.unit.a", "test_plan", 2.0),
            ("tests.integration.b", "test_train", 22.0),
            ("tests.integration.cluster", "test_two_nodes", 60.0),  # only new: not in the shared ratio
            ("tests.unit.a", "test_skip", 5.0),  # skipped in old: not shared
        ],
    )
    s = bench.shared_times(old, new, k=2)
    assert s["matched"] == 3
    assert (s["only_old"], s["only_old_s"]) == (1, 3.0)
    assert (s["only_new"], s["only_new_s"]) == (2, 65.0)
    assert (s["old_s"], s["new_s"]) == (34.0, 35.0) and s["ratio"] == pytest.approx(35.0 / 34.0)
    assert s["slowest"] == [
        ("tests.integration.b::test_train", 20.0, 22.0, pytest.approx(1.1)),
        ("tests.unit.a::test_fit", 10.0, 11.0, pytest.approx(1.1)),
    ]
    assert s["slowest_ratio"] == pytest.approx(33.0 / 30.0)

    bench.report_shared(s)
    text = capsys.readouterr().out
    assert "3 matched; 1 only in old (3.0 s), 2 only in new (65.0 s)" in text
    assert "new/old over the shared tests: 1.029 of their summed test time (old 34.0 s, new 35.0 s" in text
    assert "new/old over the 2 shared tests slowest in old: 1.100 (old 30.0 s, new 33.0 s)" in text
    assert "    20.0     22.0   1.100  tests.integration.b::test_train" in text


def test_no_shared_time_gives_no_ratio(bench, tmp_path):
    old = junit(tmp_path / "old.xml", [("tests.a", "test_x", 0.0)])
    new = junit(tmp_path / "new.xml", [("tests.a", "test_x", 1.0), ("tests.a", "test_y", 2.0)])
    s = bench.shared_times(old, new)
    assert s["matched"] == 1 and s["ratio"] is None and s["slowest"] == [("tests.a::test_x", 0.0, 1.0, None)]
