"""The notebooks import only what a user's venv has: the standard library, installed distributions and the
packages scalelab installs, never a folder of the checkout (benchmarks/, tests/) that Jupyter started from
the venv cannot see. Executing them the way Jupyter does is tests/integration/scaling/test_notebooks.py's job
(tests/helpers/notebooks.py takes the repository root off the kernel's sys.path); this reads their imports."""

from __future__ import annotations

import pytest

from tests.helpers.notebooks import NOTEBOOKS, importable_when_installed, notebook_imports


@pytest.mark.parametrize("name", sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")))
def test_a_notebook_imports_only_installed_modules(name):
    imports = notebook_imports(name)
    assert any(m.split(".")[0] == "scaling" for m in imports)  # the notebooks were read
    assert not [m for m in sorted(imports) if not importable_when_installed(m)]


def test_a_module_of_the_checkout_that_is_not_installed_is_caught():
    assert not importable_when_installed("benchmarks.moe_study_stats")  # notebooks 4 and 5 imported it
    assert not importable_when_installed("scaling.no_such_module")
    assert importable_when_installed("scaling.data.router_stats") and importable_when_installed("pandas")
