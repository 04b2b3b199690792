"""benchmarks/suite_time.py end to end on two stand-in trees whose `.ci/run` prints a pytest summary and writes
the junit file PYTEST_ADDOPTS names: both times, the ratio, the ratio over the tests both ran, the slowest tests
and the exit code come out."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO, SHARED

CI_RUN = """#!/usr/bin/env bash
junit="${PYTEST_ADDOPTS#--junitxml=}"
case='<testcase classname="tests.t" name="test_slow@g" time="%s"/>'
printf "<testsuites><testsuite>$case</testsuite></testsuites>" "@SECS@" > "$junit"
echo "tmp: $TMPDIR"
echo "@PASSED@ passed, 1 skipped, 3 warnings in @SECS@s"
exit @CODE@
"""


def tree(path, secs: float, passed: int, code: int = 0):
    (path / ".ci").mkdir(parents=True)
    (path / ".ci/run").write_text(
        CI_RUN.replace("@SECS@", str(secs)).replace("@PASSED@", str(passed)).replace("@CODE@", str(code))
    )
    (path / "tests").mkdir()
    (path / "tests/test_t.py").write_text("def test_slow():\n    assert True\n")
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"tree {passed}"],
        check=True,
    )
    return path


def test_two_trees_timed_with_their_ratio_and_slowest_tests(tmp_path):
    # the suite's shared test folder (this suite's, in use right now) is never touched: each side gets a TMPDIR
    SHARED.mkdir(parents=True, exist_ok=True)
    keep = SHARED / f"keep-{tmp_path.name}"
    keep.write_text("in use")
    old, new = tree(tmp_path / "old", 200.0, 812), tree(tmp_path / "new", 50.0, 1012)
    cmd = [sys.executable, str(REPO / "benchmarks/suite_time.py"), "--old", str(old), "--new", str(new)]
    r = subprocess.run([*cmd, "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| old | " in r.stdout and "tree 812" in r.stdout and "| 812 (1) | 200.0 |" in r.stdout
    assert "| 1012 (1) | 50.0 |" in r.stdout and "new/old: 0.250 of pytest time" in r.stdout
    assert "test_slow" in r.stdout and "@g" not in r.stdout and "| 1 |" in r.stdout  # one assert per tree
    assert "1 matched; 0 only in old (0.0 s), 0 only in new (0.0 s)" in r.stdout  # the tests both trees ran
    assert "new/old over the shared tests: 0.250 of their summed test time" in r.stdout
    assert f"tmp: {tmp_path / 'out' / 'tmp1'}" in (tmp_path / "out/old.log").read_text()
    assert keep.read_text() == "in use"
    keep.unlink()
    bad = tree(tmp_path / "bad", 10.0, 3, code=1)
    r = subprocess.run([*cmd[:-1], str(bad), "--out", str(tmp_path / "out2")], capture_output=True, text=True)
    assert r.returncode == 1 and "| new | " in r.stdout
