"""Every fit that reads a table says the same about a file it cannot use: exit 2, the path and what is
wrong on stderr, no traceback. (`fit accuracy` used to crash on a malformed CSV; `fit lr-annealing`
read a .tsv as commas.)"""

from __future__ import annotations

import pytest

from launch.cli import main
from tests.helpers import run_cli

LAWS = ("chinchilla", "kaplan", "batch-lr", "critical-batch", "lr-annealing", "accuracy", "moe", "task-loss")


BAD = {
    "bad.csv": ('a,b\n1,2\n"an unterminated quote\n', "cannot read the table"),
    "bad.parquet": ("not parquet at all", "cannot read the table"),
    "runs.xlsx": ("", "unsupported data file type '.xlsx' (use .csv, .tsv, .parquet or a run directory)"),
}


@pytest.fixture
def bad_files(tmp_path):
    for name, (text, _) in BAD.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize("law", LAWS)
def test_each_fit_refuses_an_unreadable_table_with_exit_2(law, bad_files, capsys):
    for name, (_, message) in BAD.items():
        path = bad_files / name
        assert main(["fit", law, str(path)]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith(f"error: {path}: ") and message in err and "Traceback" not in err, err
    assert main(["fit", law, str(bad_files / "missing.csv")]) == 2
    assert f"data not found: {bad_files / 'missing.csv'}" in capsys.readouterr().err


def test_the_cli_exits_2_on_a_malformed_accuracy_table(bad_files):
    r = run_cli(["fit", "accuracy", str(bad_files / "bad.csv")], bad_files)
    assert r.returncode == 2 and "cannot read the table" in r.stderr and "Traceback" not in r.stderr, r.stderr
