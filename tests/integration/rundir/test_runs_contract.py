"""The run-directory contract (runs/): summary.json keys, order and versions, tolerant readers,
the checkpoint manifest, the file table of docs/run-directory.md, and the torch-free readers."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO


def test_readers_stay_torch_free():
    code = (
        "import sys, dashboard.server, rundir.read, rundir.summary, scaling.data.inputs, scaling.planning.cost; "
        "print(sorted(m for m in ('torch', 'deepspeed', 'pretrain', 'launch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
