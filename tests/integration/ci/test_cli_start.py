"""`scalelab --help` (every subcommand's parser built) stays light: the imports that need numpy, pydantic, torch
and the rest are deferred into the commands that use them, each saying so."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO

HEAVY = ("numpy", "pandas", "scipy", "torch", "deepspeed", "matplotlib", "pydantic", "tokenizers", "lm_eval")


def test_building_every_parser_imports_nothing_heavy():
    code = f"import sys, launch.cli as c; c.build_parser(); print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
