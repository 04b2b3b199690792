"""Execute the notebooks (notebooks/[1-6]_*.ipynb) with nbclient, each in a fresh kernel, with the data source
pinned (SCALELAB_NB_SOURCE): Epoch's bundled table for the fitting and planning notebooks, the notebooks' own
studies for batch x lr, MoE and loss curves; never a local quickstart/ folder. The studies are launched once
into a shared folder (their sweeps skip finished runs, so later sessions reuse them). Notebooks 1, 2 and 6 on
the main job's output run in tests/integration/launch/test_quickstart.py, on its scaled-down job."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import SHARED, epoch_csv, requires_corpus
from tests.helpers.notebooks import execute_notebook

# what the notebooks' first cells launch (the same arguments, so the cache is the notebooks' own)
STUDIES = ("batch-lr", "moe", "wsd-tiny", "schedules")


# Module scope: the suite's conftest runs a module with a module-scoped fixture in one pytest-xdist worker, so
# two workers never train the same studies at once (their runs' locks would make one launch skip them).
@pytest.fixture(scope="module")
def studies() -> Path:
    """The notebooks' studies, trained once: SCALELAB_NB_STUDIES when set, else a folder beside the sweep
    tests' shared data. On a fresh clone this trains 45 tiny runs first: the tests that use it get a longer
    timeout than the suite's 420 s (later sessions reuse the trained runs)."""
    from launch.notebook_sources import launch_study

    root = Path(os.environ.get("SCALELAB_NB_STUDIES") or SHARED / "notebook-studies")
    old = os.environ.get("SCALELAB_NB_STUDIES")
    os.environ["SCALELAB_NB_STUDIES"] = str(root)
    try:
        for study in STUDIES:
            launch_study(study)
    finally:
        if old is None:
            os.environ.pop("SCALELAB_NB_STUDIES")
        else:
            os.environ["SCALELAB_NB_STUDIES"] = old
    return root


def test_fitting_notebook_on_epochs_table(tmp_path, monkeypatch):
    epoch_csv()  # skips when the shared data is absent
    text, images = execute_notebook("1_fitting_a_study", tmp_path, monkeypatch, "published")
    assert "source: published" in text
    assert "objective: 0.001018274" in text  # Epoch's "replicate exactly" optimum (240 points)
    assert "scalelab predict:" in text and "held-out runs inside the 95% prediction interval" in text
    assert images == 1 and (tmp_path / "figures/fitting_approach3.png").exists()


def test_planning_notebook_on_epochs_table(tmp_path, monkeypatch):
    epoch_csv()
    text, images = execute_notebook("2_from_law_to_decision", tmp_path, monkeypatch, "published")
    assert "source: published" in text
    assert "layout:" in text and "cost: $" in text
    assert images == 1 and (tmp_path / "figures/plan_pareto.png").exists()


@requires_corpus
@pytest.mark.timeout(3600)
def test_batch_lr_notebook_on_its_study(studies, tmp_path, monkeypatch):
    text, images = execute_notebook(
        "3_batch_size_and_lr", tmp_path, monkeypatch, "study", SCALELAB_NB_STUDIES=str(studies)
    )
    assert "source: study" in text and "18 finished runs" in text
    assert (tmp_path / "figures/batch_lr_fit.png").exists()


@requires_corpus
@pytest.mark.timeout(3600)
def test_moe_notebook_on_its_study(studies, tmp_path, monkeypatch):
    text, images = execute_notebook("4_moe", tmp_path, monkeypatch, "study", SCALELAB_NB_STUDIES=str(studies))
    assert "source: study" in text and "16 finished runs" in text
    assert images == 1 and (tmp_path / "figures/moe_runs.png").exists()


@requires_corpus
@pytest.mark.timeout(3600)
def test_loss_curves_notebook_on_its_studies(studies, tmp_path, monkeypatch):
    text, images = execute_notebook("5_loss_curves", tmp_path, monkeypatch, "study", SCALELAB_NB_STUDIES=str(studies))
    assert "source: study" in text and "cosine run, final logged loss: predicted" in text
    assert images == 2 and (tmp_path / "figures/annealing_cosine.png").exists()
