"""Execute the six notebooks (notebooks/[1-6]_*.ipynb) with nbclient, each in a fresh kernel, with the data
source pinned (SCALELAB_NB_SOURCE): Epoch's bundled table for the fitting and planning notebooks, the notebooks'
own studies for the others; never a local quickstart/ folder. The studies are launched once into a shared
folder (a session fixture; their sweeps skip finished runs, so later sessions reuse them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import REPO, SHARED, epoch_csv, requires_corpus

NOTEBOOKS = REPO / "notebooks"
TASKS = (
    "blimp_anaphor_gender_agreement,blimp_determiner_noun_agreement_1,"
    "blimp_regular_plural_subject_verb_agreement_1,tinyshakespeare_bpb"
)
# what each notebook's first cell launches (the same arguments, so the cache is the notebooks' own)
STUDIES = {
    "batch-lr": None,
    "moe": None,
    "wsd-tiny": None,
    "schedules": None,
    "accuracy": ["--suite", "tiny", "--tasks", TASKS, "--limit", "100"],
}


# Module scope: the suite's conftest runs a module with a module-scoped fixture in one pytest-xdist worker, so
# two workers never train the same studies at once (their runs' locks would make one launch skip them).
@pytest.fixture(scope="module")
def studies() -> Path:
    """The notebooks' studies, trained (and the ladder evaluated) once: SCALELAB_NB_STUDIES when set, else
    a folder beside the sweep tests' shared data. On a fresh clone this trains ~45 tiny runs first: the tests
    that use it get a longer timeout than the suite's 420 s (later sessions reuse the trained runs)."""
    from launch.notebook_sources import launch_study

    root = Path(os.environ.get("SCALELAB_NB_STUDIES") or SHARED / "notebook-studies")
    old = os.environ.get("SCALELAB_NB_STUDIES")
    os.environ["SCALELAB_NB_STUDIES"] = str(root)
    try:
        for study, evaluate in STUDIES.items():
            launch_study(study, evaluate=evaluate)
    finally:
        if old is None:
            os.environ.pop("SCALELAB_NB_STUDIES")
        else:
            os.environ["SCALELAB_NB_STUDIES"] = old
    return root


def _execute(name: str, tmp_path: Path, monkeypatch, source: str, **env):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("SCALELAB_NB_SOURCE", source)
    monkeypatch.setenv("SCALELAB_NB_BOOTSTRAP", "8")
    monkeypatch.setenv(
        "SCALELAB_NB_MOE_STARTS", "8"
    )  # the MoE fit's starts (default 32: the same optimum here, 6x slower)
    monkeypatch.setenv("SCALELAB_QUICKSTART", str(tmp_path / "no-quickstart"))  # a local quickstart/ is never read
    monkeypatch.delenv("SCALELAB_NB_RUNS", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert not errors, errors[0].get("evalue")
    text = "".join(o.get("text", "") for o in outputs) + "".join(
        (o.get("data") or {}).get("text/plain", "") for o in outputs
    )
    images = sum("image/png" in (o.get("data") or {}) for o in outputs)
    return text, images


def test_fitting_notebook_on_epochs_table(tmp_path, monkeypatch):
    epoch_csv()  # skips when the shared data is absent
    text, images = _execute("1_fitting_a_study", tmp_path, monkeypatch, "published")
    assert "source: published" in text
    assert "objective: 0.001018274" in text  # Epoch's "replicate exactly" optimum (240 points)
    assert "scalelab predict:" in text and "held-out runs inside the 95% prediction interval" in text
    assert images == 1 and (tmp_path / "figures/fitting_approach3.png").exists()


def test_planning_notebook_on_epochs_table(tmp_path, monkeypatch):
    epoch_csv()
    text, images = _execute("2_from_law_to_decision", tmp_path, monkeypatch, "published")
    assert "source: published" in text
    assert "layout:" in text and "cost: $" in text
    assert images == 1 and (tmp_path / "figures/plan_pareto.png").exists()


@requires_corpus
@pytest.mark.timeout(3600)
def test_batch_lr_notebook_on_its_study(studies, tmp_path, monkeypatch):
    text, images = _execute("3_batch_size_and_lr", tmp_path, monkeypatch, "study", SCALELAB_NB_STUDIES=str(studies))
    assert "source: study" in text and "18 finished runs" in text
    assert (tmp_path / "figures/batch_lr_fit.png").exists()


@requires_corpus
@pytest.mark.timeout(3600)
def test_moe_notebook_on_its_study(studies, tmp_path, monkeypatch):
    text, images = _execute("4_moe", tmp_path, monkeypatch, "study", SCALELAB_NB_STUDIES=str(studies))
    assert "source: study" in text and "16 finished runs" in text
    assert images == 1 and (tmp_path / "figures/moe_runs.png").exists()


@requires_corpus
@pytest.mark.timeout(3600)
def test_loss_curves_notebook_on_its_studies(studies, tmp_path, monkeypatch):
    text, images = _execute("5_loss_curves", tmp_path, monkeypatch, "study", SCALELAB_NB_STUDIES=str(studies))
    assert "source: study" in text and "cosine run, final logged loss: predicted" in text
    assert images == 2 and (tmp_path / "figures/annealing_cosine.png").exists()


@requires_corpus
@pytest.mark.timeout(3600)
def test_accuracy_notebook_on_its_study(studies, tmp_path, monkeypatch):
    text, images = _execute("6_loss_to_accuracy", tmp_path, monkeypatch, "study", SCALELAB_NB_STUDIES=str(studies))
    assert "source: study" in text and "held-out accuracies inside their 95% prediction interval" in text
    assert images == 1 and (tmp_path / "figures/accuracy_chain.png").exists()
