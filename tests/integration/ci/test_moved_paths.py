"""Module paths that live outside the code keep working for a release after the package redesign: already-
submitted Slurm scripts (`python -m launch.worker`), evaluator plugins (`pretrain.checkpoint_eval`, the
`scalelab.checkpoint_evaluators` entry point) and notebooks (`from scaling import ...`, scaling.laws, .synthetic,
.plots)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

from tests.helpers import REPO


def test_submitted_slurm_scripts_still_start_the_worker(tmp_path):
    # the worker's own check of its argument: a run directory without launch.yaml exits 2 and says why
    r = subprocess.run(
        [sys.executable, "-m", "launch.worker", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2, r.stderr
    assert "no launch.yaml" in r.stderr


def test_evaluator_plugins_and_the_entry_point_resolve():
    import pretrain.checkpoint.evaluators as new
    import pretrain.checkpoint_eval as old

    assert old.CheckpointEvaluator is new.CheckpointEvaluator and old.evaluator is new.evaluator
    (ep,) = [e for e in entry_points(group=new.GROUP) if e.name == new.NAME]
    assert ep.load() is not None


def test_notebook_imports_of_scaling_still_work():
    from scaling import fit_chinchilla
    from scaling.fits.chinchilla.approaches import fit_chinchilla as defined
    from scaling.laws import ChinchillaLaw  # noqa: F401
    from scaling.plots import plot_fit  # noqa: F401
    from scaling.synthetic import chinchilla_table  # noqa: F401

    assert fit_chinchilla is defined


def test_the_dashboard_demo_command_still_starts():
    # `python -m dashboard.demo DIR` (the module moved to dashboard.demo.build): its --help, no training
    r = subprocess.run(
        [sys.executable, "-m", "dashboard.demo", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and "--no-fits" in r.stdout, r.stderr
