"""The main job's steps as data (launch.quickstart.steps.Step): a step reruns when its command line or an
input's content changes, or an input comes or goes, or an output is missing; never because of a file's mtime."""

from __future__ import annotations

import os

from launch.quickstart.steps import Step


def test_a_step_reruns_on_content_and_settings_never_on_mtime(tmp_path):
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "fit.json"
    a.write_text('{"loss": 3.0}')
    b.write_text('{"loss": 2.5}')
    calls = []

    def scalelab(*argv, allow_fail=False):
        calls.append(argv)
        out.write_text("record")
        return 0

    def step(bootstrap="8", inputs=(a, b)):
        return Step.of("fit.json", ["fit", "chinchilla", "--bootstrap", bootstrap, "--out", out], inputs, [out])

    assert step().run(scalelab) == 0 and len(calls) == 1
    assert step().run(scalelab) is None and len(calls) == 1  # up to date
    os.utime(a, (1e10, 1e10))  # an input newer than the output (a copy, a touch, another host's clock)
    os.utime(out, (1e3, 1e3))
    assert step().run(scalelab) is None and len(calls) == 1
    a.write_text('{"loss": 2.9}')  # an input's content
    assert step().run(scalelab) == 0 and len(calls) == 2
    assert step(bootstrap="16").run(scalelab) == 0 and len(calls) == 3  # a setting
    assert step(bootstrap="16", inputs=(a,)).run(scalelab) == 0 and len(calls) == 4  # a run removed
    out.unlink()
    assert step(bootstrap="16", inputs=(a,)).run(scalelab) == 0 and len(calls) == 5  # the output gone
    assert calls[-1] == ("fit", "chinchilla", "--bootstrap", "16", "--out", str(out))


def test_a_failed_step_is_not_recorded_and_runs_again(tmp_path):
    out = tmp_path / "plan.json"
    codes = iter([1, 0])

    def scalelab(*argv, allow_fail=False):
        out.write_text("partial")
        return next(codes)

    s = Step.of("plan", ["plan", "--compute", "1e18", "--out", out], [], [out])
    assert s.run(scalelab, allow_fail=True) == 1 and not s.stamp.exists()
    assert s.run(scalelab) == 0 and s.stamp.exists() and s.up_to_date()
