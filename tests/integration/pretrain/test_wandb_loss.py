"""W&B losing its service process never fails a run. What `scancel` does on a Slurm node: SIGTERM
to every process of the job at once, the trainer and W&B's `wandb-core` alike; the trainer must
still checkpoint, write `status: preempted` and exit 3, with a one-line warning and no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import children, prepared_data, requires_corpus, write_base

pytestmark = pytest.mark.slow


@requires_corpus
def test_sigterm_to_trainer_and_wandb_service_exits_3_after_a_checkpoint(work):
    data = prepared_data()
    base = write_base(work / "base", data, steps=2000, checkpoint_every_steps=4, log_every_steps=1)
    cfg = base.read_text().replace("mode: disabled", "mode: offline")
    base.write_text(cfg)
    run_dir = work / "run"
    env = {**os.environ, "WANDB_MODE": "offline"}
    p = subprocess.Popen(
        [sys.executable, "-m", "pretrain.cli", str(base), "--run-dir", str(run_dir)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        t0 = time.time()
        # any complete checkpoint: at a few ms a step, step_4 may already be pruned when this loop looks
        while not list((run_dir / "checkpoints").glob("step_*/COMPLETE")):
            assert p.poll() is None and time.time() - t0 < 300, "trainer never reached its first checkpoint"
            time.sleep(0.1)
        service = [c for c in children(p.pid) if "wandb-core" in Path(f"/proc/{c}/cmdline").read_text()]
        assert service, "W&B offline did not start its service process"
        for pid in [p.pid, *service]:  # Slurm signals every process of the job
            os.kill(pid, signal.SIGTERM)
        out, _ = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 3, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert "received SIGTERM: checkpoint step_" in out
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["status"] == "preempted" and s.get("error") is None
    assert (run_dir / "checkpoints" / f"step_{s['steps']}" / "COMPLETE").exists()
