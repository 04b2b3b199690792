"""Chinchilla fits: Epoch acceptance numbers, approach consistency, synthetic recovery, warnings."""

from __future__ import annotations


def test_cli_module_is_light():
    import subprocess
    import sys

    code = (
        "import sys, argparse, scaling.cli as c; p = argparse.ArgumentParser(); c.register(p.add_subparsers()); "
        "print(sorted(m for m in ('numpy', 'pandas', 'scipy', 'torch', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
