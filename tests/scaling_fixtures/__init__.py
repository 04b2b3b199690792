"""Helpers for the scaling tests (data location, CLI runner)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def epoch_csv() -> Path:
    root = Path(os.environ.get("SCALELAB_DATA_ROOT", REPO.parent / "shared" / "data"))
    p = root / "scaling" / "epoch_chinchilla_svg_extracted.csv"
    if not p.exists():
        pytest.skip(f"Epoch Chinchilla data not found at {p} (set SCALELAB_DATA_ROOT to the shared data folder)")
    return p


def scalelab(*args: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess (`python -m launch.cli ...`)."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-m", "launch.cli", *map(str, args)], cwd=cwd or REPO, env=env, capture_output=True, text=True, timeout=timeout)
