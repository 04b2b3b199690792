"""`runs list` / `sweep status` tables: rich on a terminal, aligned plain text in pipes and logs."""
from __future__ import annotations

import io
import os
import pty
import subprocess

from conftest import REPO, SCALELAB, scalelab, small_run

from launch.tables import render

COLS = [("name", "run", ""), ("state", "state", ""), ("progress", "progress", "pct"), ("loss", "loss", ""), ("wall_s", "wall", "time")]
ROWS = [{"name": "n50k-lr1e-3 [x]", "state": "done", "progress": 1.0, "loss": 4.2, "wall_s": 75},
        {"name": "b", "state": "failed", "progress": 0.25, "loss": None, "wall_s": 5}]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_text_when_not_a_terminal():
    out = io.StringIO()
    render(ROWS, COLS, out=out)
    assert out.getvalue() == ("run               state  progress  loss   wall\n"
                              "---------------  ------  --------  ----  -----\n"
                              "n50k-lr1e-3 [x]    done      100%   4.2  1m15s\n"
                              "b                failed       25%     -  0m05s\n")


def test_rich_on_a_terminal_with_coloured_states():
    out = Terminal()
    render(ROWS, COLS, out=out)
    text = out.getvalue()
    assert "─" in text and "\x1b[" in text  # a rich table, with styles
    assert "n50k-lr1e-3 [x]" in text  # brackets shown as they are, not read as markup
    assert "\x1b[32m  done\x1b[0m" in text and "\x1b[1;31mfailed\x1b[0m" in text
    assert "1m15s" in text and "25%" in text


def test_runs_list_draws_rich_only_on_a_terminal(tmp_path):
    small_run(tmp_path / "runs", "s/a")
    piped = scalelab("runs", "list", tmp_path / "runs", cwd=tmp_path)
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout and piped.stdout.startswith("run ")
    main, sub = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "TERM": "xterm"}
    proc = subprocess.run(SCALELAB + ["runs", "list", str(tmp_path / "runs")], cwd=tmp_path, env=env, stdout=sub,
                          stderr=subprocess.PIPE, timeout=120)
    os.close(sub)
    data = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    os.close(main)
    text = data.decode()
    assert proc.returncode == 0, proc.stderr
    assert "─" in text and "\x1b[" in text and "1 runs under" in text
