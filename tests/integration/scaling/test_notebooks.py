"""Execute the three notebooks on small data with nbclient (fresh kernel each)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import REPO, epoch_csv

NOTEBOOKS = REPO / "notebooks"


def _execute(name: str, tmp_path: Path, monkeypatch, **env) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors
    return nb


def test_notebook_chinchilla_epoch(tmp_path, monkeypatch):
    epoch_csv()  # skips when the shared data is absent
    nb = _execute("chinchilla_epoch.ipynb", tmp_path, monkeypatch, SCALELAB_NB_BOOTSTRAP="8")
    assert (tmp_path / "epoch_chinchilla_fit.png").exists()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "objective: 0.00101827" in text


def test_notebook_batch_lr_synthetic(tmp_path, monkeypatch):
    monkeypatch.delenv("SCALELAB_BSLR_DATA", raising=False)
    _execute("batch_lr_law.ipynb", tmp_path, monkeypatch, SCALELAB_NB_BOOTSTRAP="8")
    assert (tmp_path / "batch_lr_fit.png").exists()


def test_notebook_sweep_analysis_fallback_tree(tmp_path, monkeypatch):
    monkeypatch.delenv("SCALELAB_SWEEP_DIR", raising=False)
    _execute("sweep_analysis.ipynb", tmp_path, monkeypatch, SCALELAB_NB_BOOTSTRAP="8")
    assert (tmp_path / "sweep_fit.png").exists()


def test_notebook_sweep_analysis_on_given_dir(tmp_path, monkeypatch):
    from scaling.synthetic.runs import chinchilla_table, write_run_tree

    runs = tmp_path / "runs"
    write_run_tree(
        runs, chinchilla_table(budgets=(1e15, 1e16, 1e17), n_per_budget=5, noise=0.003), sweep="isoflop-test"
    )
    _execute("sweep_analysis.ipynb", tmp_path, monkeypatch, SCALELAB_NB_BOOTSTRAP="8", SCALELAB_SWEEP_DIR=str(runs))
    assert (tmp_path / "sweep_fit.png").exists()
