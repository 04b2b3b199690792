"""Execute a notebook (notebooks/<name>.ipynb) with nbclient in a fresh kernel, with its data source pinned
(SCALELAB_NB_SOURCE), and return what it printed and how many images it showed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.cli import REPO

NOTEBOOKS = REPO / "notebooks"


def execute_notebook(name: str, tmp_path: Path, monkeypatch, source: str, **env: str) -> tuple[str, int]:
    """Run every cell in `tmp_path` (figures land there); fail on the first error with its message. A local
    quickstart/ folder is never read unless `SCALELAB_QUICKSTART` is given in `env`."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("SCALELAB_NB_SOURCE", source)
    monkeypatch.setenv("SCALELAB_NB_BOOTSTRAP", "8")
    monkeypatch.setenv("SCALELAB_NB_MOE_STARTS", "8")  # the MoE fit's starts (default 32: the same optimum, 6x slower)
    monkeypatch.setenv("SCALELAB_QUICKSTART", str(tmp_path / "no-quickstart"))
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
