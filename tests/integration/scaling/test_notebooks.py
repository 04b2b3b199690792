"""Execute the notebooks (notebooks/[1-6]_*.ipynb) with nbclient, each in a fresh kernel, with the data source
pinned (SCALELAB_NB_SOURCE): Epoch's bundled table for the fitting and planning notebooks, the notebooks' own
studies for batch x lr, MoE and loss curves; never a local quickstart/ folder. The studies are launched once
into a shared folder (their sweeps skip finished runs, so later sessions reuse them). Notebooks 1, 2 and 6 on
the main job's output run in tests/integration/launch/test_quickstart.py, on its scaled-down job."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.helpers import SHARED, epoch_csv, requires_corpus
from tests.helpers.notebooks import execute_notebook

# what the notebooks' first cells launch: the shipped specs with the token counts below (a quarter of theirs;
# everything else, the run grid included, as shipped), written to a folder the notebooks read through
# SCALELAB_NB_STUDY_SPECS. The shipped specs' own expansion and validation are checked in process by
# tests/unit/launch/test_notebook_sources.py.
SHORT = {  # `sweep launch --set` edits (launch.sweep.spec.edit_spec)
    "batch-lr": ["batch_lr.tokens=37500.0"],
    "moe": ["moe.tokens=[25000.0, 75000.0]"],
    "wsd-tiny": [],  # 8 runs of at most 64 steps already
    "schedules": ["set.train.tokens=131072"],  # 128 steps of 1,024 tokens
}
EVAL_TOKENS = "set.train.eval_tokens=4096"  # each run's final evaluation (the shipped studies use 16K-32K tokens)


def short_specs(folder: Path) -> Path:
    """The studies' specs with SHORT's edits and EVAL_TOKENS, as <folder>/<study>.yaml."""
    from launch.notebook_sources import study_spec
    from launch.sweep.spec import edit_spec

    folder.mkdir(parents=True, exist_ok=True)
    for study, edits in SHORT.items():
        spec = edit_spec(yaml.safe_load(study_spec(study).read_text()), [*edits, EVAL_TOKENS])
        (folder / f"{study}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


# Module scope: the suite's conftest runs a module with a module-scoped fixture in one pytest-xdist worker, so
# two workers never train the same studies at once (their runs' locks would make one launch skip them).
@pytest.fixture(scope="module")
def studies() -> dict[str, str]:
    """The environment that points the notebooks at their studies, trained once (45 tiny runs): the folder
    SCALELAB_NB_STUDIES names when set, else one beside the sweep tests' shared data, which later sessions
    reuse. The tests that use it get a longer timeout than the suite's 420 s."""
    from launch.notebook_sources import launch_study

    root = Path(os.environ.get("SCALELAB_NB_STUDIES") or SHARED / "notebook-studies-short")
    env = {"SCALELAB_NB_STUDIES": str(root), "SCALELAB_NB_STUDY_SPECS": str(short_specs(root / "specs"))}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        for study in SHORT:
            launch_study(study)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    return env


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
    text, images = execute_notebook("3_batch_size_and_lr", tmp_path, monkeypatch, "study", **studies)
    assert "source: study" in text and "18 finished runs" in text
    assert (tmp_path / "figures/batch_lr_fit.png").exists()


@requires_corpus
@pytest.mark.timeout(3600)
def test_moe_notebook_on_its_study(studies, tmp_path, monkeypatch):
    text, images = execute_notebook("4_moe", tmp_path, monkeypatch, "study", **studies)
    assert "source: study" in text and "16 finished runs" in text
    assert images == 1 and (tmp_path / "figures/moe_runs.png").exists()


@requires_corpus
@pytest.mark.timeout(3600)
def test_loss_curves_notebook_on_its_studies(studies, tmp_path, monkeypatch):
    text, images = execute_notebook("5_loss_curves", tmp_path, monkeypatch, "study", **studies)
    assert "source: study" in text and "cosine run, final logged loss: predicted" in text
    assert images == 2 and (tmp_path / "figures/annealing_cosine.png").exists()
