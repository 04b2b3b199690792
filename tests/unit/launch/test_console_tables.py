"""`runs list` / `sweep status` tables: rich on a terminal, aligned plain text in pipes and logs."""

from __future__ import annotations

import io

from launch.console_tables import render

COLS = [
    ("name", "run", ""),
    ("state", "state", ""),
    ("progress", "progress", "pct"),
    ("loss", "loss", ""),
    ("wall_s", "wall", "time"),
]


ROWS = [
    {"name": "n50k-lr1e-3 [x]", "state": "done", "progress": 1.0, "loss": 4.2, "wall_s": 75},
    {"name": "b", "state": "failed", "progress": 0.25, "loss": None, "wall_s": 5},
]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_text_when_not_a_terminal():
    out = io.StringIO()
    render(ROWS, COLS, out=out)
    assert out.getvalue() == (
        "run               state  progress  loss   wall\n"
        "---------------  ------  --------  ----  -----\n"
        "n50k-lr1e-3 [x]    done      100%   4.2  1m15s\n"
        "b                failed       25%     -  0m05s\n"
    )


def test_rich_on_a_terminal_with_coloured_states():
    out = Terminal()
    render(ROWS, COLS, out=out)
    text = out.getvalue()
    assert "─" in text and "\x1b[" in text  # a rich table, with styles
    assert "n50k-lr1e-3 [x]" in text  # brackets shown as they are, not read as markup
    assert "\x1b[32m  done\x1b[0m" in text and "\x1b[1;31mfailed\x1b[0m" in text
    assert "1m15s" in text and "25%" in text
