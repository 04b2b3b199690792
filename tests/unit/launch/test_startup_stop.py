"""A stop signal during a run's start-up (importing torch and DeepSpeed, preparing data) stops the
run, never fails it: the trainer itself (exit 3 once its early handler is in), and the local,
DeepSpeed and Slurm-worker launchers when the signal they forwarded killed a trainer before
Python could install any handler."""

from __future__ import annotations

import signal

from launch.executors.deepspeed_multinode import outcome, summary_stamp
from launch.run.worker import EXIT_STOPPED, died_of, stopped_in_startup


def test_death_by_a_forwarded_signal_reads_as_a_stop():
    stops = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)
    assert died_of(-15, stops) == "SIGTERM" and died_of(128 + 10, stops) == "SIGUSR1"
    assert stopped_in_startup(-signal.SIGTERM, stops) and stopped_in_startup(130, stops)
    # a clean stop, a success, a failure or a crash of another signal are what they are
    for code in (0, 3, 1, 2, -signal.SIGKILL, -signal.SIGSEGV):
        assert not stopped_in_startup(code, stops), code
    assert not stopped_in_startup(-signal.SIGTERM, (signal.SIGUSR1,))  # a signal nobody forwarded


def test_deepspeed_launch_outcome_after_a_stop(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    before = summary_stamp(run)
    assert outcome(run, 1, stopping=True, before=before) == EXIT_STOPPED  # stopped while starting: no summary
    assert outcome(run, 1, stopping=False, before=before) == 1  # no stop asked: a failure
    (run / "summary.json").write_text('{"status": "failed"}')
    assert outcome(run, 1, stopping=True, before=before) == 1  # this attempt failed during the stop
    old = summary_stamp(run)
    assert outcome(run, 1, stopping=True, before=old) == EXIT_STOPPED  # an earlier attempt's summary says nothing
    (run / "summary.json").write_text('{"status": "preempted", "steps": 4}')
    assert outcome(run, 1, stopping=True, before=old) == EXIT_STOPPED
    (run / "summary.json").write_text('{"status": "done", "steps": 12, "x": 1}')
    assert outcome(run, 1, stopping=True, before=old) == 0
