"""base.cli.ArgumentParser: options and positionals in any order, through subcommands; argparse's own
parsing where it cannot intermix (REMAINDER), and its errors unchanged."""

from __future__ import annotations

import argparse

import pytest

from base.cli import ArgumentParser


def parser() -> ArgumentParser:
    p = ArgumentParser(prog="x")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")  # of the root's class, like every scalelab subcommand
    t.add_argument("config")
    t.add_argument("overrides", nargs="*")
    t.add_argument("--run-dir")
    t.add_argument("--dry-run", action="store_true")
    return p


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "c.yaml", "a=1", "b=2", "--run-dir", "r", "--dry-run"],
        ["train", "c.yaml", "--run-dir", "r", "a=1", "--dry-run", "b=2"],
        ["train", "--dry-run", "c.yaml", "a=1", "--run-dir", "r", "b=2"],
    ],
)
def test_any_order_gives_the_same_namespace(argv):
    a = parser().parse_args(argv)
    assert (a.config, a.overrides, a.run_dir, a.dry_run) == ("c.yaml", ["a=1", "b=2"], "r", True)


def test_errors_are_argparses(capsys):
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(["train", "c.yaml", "--bogus", "a=1"])
    assert exc.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser().parse_args(["train", "--run-dir", "r"])  # the config is still required
    assert "required: config" in capsys.readouterr().err


def test_a_remainder_positional_keeps_plain_parsing():
    p = ArgumentParser(prog="x")
    p.add_argument("--n", type=int)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args(["--n", "2", "python", "-c", "pass"])
    assert (a.n, a.cmd) == (2, ["python", "-c", "pass"])
