"""Input errors are clear and come before any model is loaded: unknown tasks/suites, missing
data, mismatched tokenizers; local task YAMLs resolve their data from any working directory."""

from __future__ import annotations

from tests.unit.evals.test_tasks import run_dir  # noqa: F401 (shared with the unit tests)


def test_cli_exit_code_2_for_bad_input(run_dir, capsys):
    from launch.cli import main

    assert main(["eval", str(run_dir), "--tasks", "nonsense_task"]) == 2
    assert "unknown task" in capsys.readouterr().err
