"""Execute a notebook (notebooks/<name>.ipynb) with nbclient in a fresh kernel, with its data source pinned
(SCALELAB_NB_SOURCE), and return what it printed and how many images it showed.

The kernel sees what Jupyter started from the venv sees: its working directory elsewhere (the test's
folder), the repository root off sys.path (the editable install puts it there; `INSTALLED_ONLY` takes it
off) and the installed packages (pyproject.toml's) importable, so a notebook that imports something the
package does not install (benchmarks/, tests/) fails here as it fails for a user."""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

import pytest

from tests.helpers.cli import REPO

NOTEBOOKS = REPO / "notebooks"
# the top-level packages pip installs (pyproject.toml [tool.setuptools.packages.find] include)
INSTALLED = sorted(
    {
        pattern.split(".")[0].rstrip("*")
        for pattern in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"][
            "include"
        ]
    }
)
# the kernel's first cell: the repository root off sys.path, and of what lies there only the installed packages
INSTALLED_ONLY = f"""
import importlib.machinery as _m, os as _os, sys as _sys
_sys.path[:] = [p for p in _sys.path if _os.path.realpath(p or _os.getcwd()) != {str(REPO.resolve())!r}]
class _Installed:
    _find = staticmethod(_m.PathFinder.find_spec)
    def find_spec(self, name, path=None, target=None):
        return self._find(name, [{str(REPO)!r}]) if name in {INSTALLED!r} else None
_sys.meta_path.append(_Installed())
del _m, _os, _sys, _Installed
"""


def off_repo_pythonpath() -> str:
    """PYTHONPATH without the repository root (the kernel must not find benchmarks/ or tests/ through it)."""
    parts = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return os.pathsep.join(p for p in parts if p and Path(p).resolve() != REPO.resolve())


def notebook_imports(name: str) -> set[str]:
    """The modules a notebook's code cells import (`import a.b`, `from a.b import c`: a.b)."""
    import ast

    nbformat = pytest.importorskip("nbformat")
    out: set[str] = set()
    for cell in nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                out.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                out.add(node.module)
    return out


def importable_when_installed(module: str) -> bool:
    """Whether `module` imports with the repository root off sys.path: the standard library, an installed
    distribution, or a module of the installed packages (found in the checkout, as the editable install finds it)."""
    import importlib.machinery

    top = module.split(".")[0]
    if top in sys.builtin_module_names or top in sys.stdlib_module_names:
        return True
    if top in INSTALLED:
        return (REPO.joinpath(*module.split(".")).with_suffix(".py")).is_file() or (
            REPO.joinpath(*module.split("."), "__init__.py")
        ).is_file()
    path = [p for p in sys.path if Path(p or os.getcwd()).resolve() != REPO.resolve()]
    return importlib.machinery.PathFinder.find_spec(top, path) is not None


def execute_notebook(name: str, tmp_path: Path, monkeypatch, source: str, **env: str) -> tuple[str, int]:
    """Run every cell in `tmp_path` (figures land there); fail on the first error with its message. A local
    quickstart/ folder is never read unless `SCALELAB_QUICKSTART` is given in `env`."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYTHONPATH", off_repo_pythonpath())
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("SCALELAB_NB_SOURCE", source)
    monkeypatch.setenv("SCALELAB_NB_BOOTSTRAP", "8")
    monkeypatch.setenv("SCALELAB_NB_MOE_STARTS", "8")  # the MoE fit's starts (default 32: the same optimum, 6x slower)
    monkeypatch.setenv("SCALELAB_QUICKSTART", str(tmp_path / "no-quickstart"))
    monkeypatch.delenv("SCALELAB_NB_RUNS", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(INSTALLED_ONLY))
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
