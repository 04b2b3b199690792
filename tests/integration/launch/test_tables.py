"""`runs list` / `sweep status` tables: rich on a terminal, aligned plain text in pipes and logs."""

from __future__ import annotations

import os
import pty
import subprocess

from tests.helpers import REPO, SCALELAB, scalelab, small_run


def test_runs_list_draws_rich_only_on_a_terminal(tmp_path):
    small_run(tmp_path / "runs", "s/a")
    piped = scalelab("runs", "list", tmp_path / "runs", cwd=tmp_path)
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout and piped.stdout.startswith("run ")
    main, sub = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "TERM": "xterm"}
    proc = subprocess.run(
        SCALELAB + ["runs", "list", str(tmp_path / "runs")],
        cwd=tmp_path,
        env=env,
        stdout=sub,
        stderr=subprocess.PIPE,
        timeout=120,
    )
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
