"""How a trainer process ends (pretrain.engine.distributed.exit_process). A rank of a multi-rank group keeps
its exit code and runs the Python exit hooks (W&B's teardown lives there) but skips interpreter
finalisation, where gloo can abort a run that finished; a one-process run exits normally."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO

SCRIPT = """
import atexit, os, sys
import pretrain.engine.distributed as d
out = sys.argv[1]
atexit.register(lambda: open(os.path.join(out, "hook"), "w").write("ran"))
class Finalised:
    def __del__(self, _open=open, _path=os.path.join(out, "finalised")):  # bound now: globals are gone by then
        _open(_path, "w").write("ran")
keep = Finalised()  # collected only during interpreter finalisation
d._group_world = int(sys.argv[2])
print("last line", flush=False)
d.exit_process(3)
"""


@pytest.mark.parametrize("world,finalised", [(2, False), (1, True)])
def test_exit_keeps_the_code_and_hooks_and_skips_finalisation_for_ranks(world, finalised, tmp_path):
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), str(world)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode == 3, res.stderr
    assert res.stdout == "last line\n"  # buffered output is flushed before the process ends
    assert (tmp_path / "hook").read_text() == "ran"
    assert (tmp_path / "finalised").exists() == finalised
