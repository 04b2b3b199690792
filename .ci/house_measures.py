"""The measures issue #46 counts in a tree, so a before and an after come from the same script:

    python .ci/house_measures.py [ROOT]      # ROOT: a checkout or an exported tree (default: this one)

- functions (and methods) over 100 lines in package code, and with benchmarks/ too;
- modules over 500 lines in package code;
- compatibility modules: a package module whose code is only imports (plus `__all__` and a `__main__` block), i.e.
  names re-exported from elsewhere (package `__init__.py` files are left out: they declare a package);
- subpackage cycles (.ci/import_cycles.py's subpackage graph, run on ROOT);
- hand-kept key lists: a module-level tuple/list/set/frozenset of 3+ string literals that name dotted config keys
  (`train.seed`, `optim.lr`), which a schema's field metadata should give instead. Counted only where the train
  config's schema (pretrain.config.schema, its roles in base/roles.py) can be read: pretrain, launch and the
  dashboard. Elsewhere the layers (pyproject.toml's import-linter contracts) forbid importing it, so such a list
  is that package's own vocabulary, not a role the schema could give: scaling/data/recipe.py's RECIPE_KEYS
  (which training settings a fitted law's prediction depends on: a fit record's `recipe.settings`) and SWEPT
  (which of those a law's runs vary on purpose: batch-lr's lr and batch, not every sweep axis). Those are
  listed apart ("own key lists") and tied to the schema by a test (tests/unit/scaling/test_recipe_keys.py:
  each is a key of the train config, SWEPT among its sweep axes);
- mypy: the modules exempt in pyproject's `[[tool.mypy.overrides]]` (`ignore_errors`), the error counts written
  beside them, and the `# type: ignore` comments in package code.

Package code: base models rundir pretrain scaling evals launch dashboard (what exists in ROOT).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

PACKAGES = ("base", "models", "rundir", "pretrain", "scaling", "evals", "launch", "dashboard")
SECTIONS = "model|data|train|optim|schedule|deepspeed|wandb|eval|callbacks"  # a train config's sections
KEY = re.compile(rf"^({SECTIONS})\.[a-z_][a-z_0-9.]*$")
SCHEMA_READERS = ("pretrain", "launch", "dashboard")  # the packages the layers let import pretrain.config


def py_files(root: Path, dirs) -> list[Path]:
    return [p for d in dirs if (root / d).is_dir() for p in sorted((root / d).rglob("*.py"))]


def long_functions(files, root: Path, limit: int = 100) -> list[str]:
    out = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({n} lines)")
    return out


def long_modules(files, root: Path, limit: int = 500) -> list[str]:
    return [f"{p.relative_to(root)} ({n} lines)" for p in files if (n := len(p.read_text().splitlines())) > limit]


def compatibility_modules(files, root: Path) -> list[str]:
    out = []
    for path in files:
        if path.name == "__init__.py":
            continue
        body = ast.parse(path.read_text()).body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        imports = [n for n in body if isinstance(n, ast.Import | ast.ImportFrom)]
        rest = [
            n
            for n in body
            if n not in imports
            and not (isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in n.targets))
            and not (isinstance(n, ast.If) and "__main__" in ast.unparse(n.test))  # `python -m old.path` kept
        ]
        if imports and not rest and any(isinstance(n, ast.ImportFrom) and n.module != "__future__" for n in imports):
            out.append(str(path.relative_to(root)))
    return out


def key_lists(files, root: Path) -> list[str]:
    out = []
    for path in files:
        for node in ast.parse(path.read_text()).body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if isinstance(value, ast.Call) and getattr(value.func, "id", "") in ("frozenset", "set", "tuple"):
                value = value.args[0] if value.args else None
            if isinstance(value, ast.Tuple | ast.List | ast.Set):
                keys = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if len(keys) >= 3 and len(keys) == len(value.elts) and sum(bool(KEY.match(k)) for k in keys) >= 3:
                    out.append(f"{path.relative_to(root)}:{node.lineno} ({len(keys)} keys)")
    return out


def subpackage_cycles(root: Path) -> int | None:
    script = root / ".ci" / "import_cycles.py"
    if not script.exists():
        return None
    spec = importlib.util.spec_from_file_location("import_cycles_at_root", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.ROOT = root
    g = mod.graph()
    if hasattr(mod, "subpackage_graph"):
        sg, _ = mod.subpackage_graph(g, mod.subpackages(mod.project_modules()))
    else:  # a tree from before the subpackage mode: build the same graph here
        modules = mod.project_modules()
        subs = {m for m, p in modules.items() if p.name == "__init__.py" and m.count(".") == 1}
        unit = lambda m: ".".join(m.split(".")[:2]) if ".".join(m.split(".")[:2]) in subs else None  # noqa: E731
        sg = {s: set() for s in subs}
        for m, targets in g.items():
            for t in targets:
                a, b = unit(m), unit(t)
                if a and b and a != b:
                    sg[a].add(b)
    return len(mod.cycles(sg))


def mypy_exemptions(root: Path, files) -> tuple[int, int | None, int]:
    text = (root / "pyproject.toml").read_text()
    exempt, errors = 0, 0
    for block in re.findall(r"\[\[tool\.mypy\.overrides\]\]\s*module = \[(.*?)\]", text, re.S):
        for line in block.splitlines():
            m = re.match(r'\s*"([\w.]+)",\s*(?:#\s*(\d+))?', line)
            if m:
                exempt += 1
                errors += int(m.group(2) or 0)
    ignores = sum(p.read_text().count("# type: ignore") for p in files)
    return exempt, (errors if "[tool.mypy]" in text else None), ignores


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else Path(__file__).resolve().parents[1]).resolve()
    pkg = py_files(root, PACKAGES)
    bench = py_files(root, ("benchmarks",))
    fns, fns_b = long_functions(pkg, root), long_functions(bench, root)
    mods = long_modules(pkg, root)
    compat = compatibility_modules(pkg, root)
    keys = key_lists(py_files(root, SCHEMA_READERS), root)
    own_keys = key_lists([p for p in pkg if p.relative_to(root).parts[0] not in SCHEMA_READERS], root)
    exempt, errors, ignores = mypy_exemptions(root, pkg)
    print(f"tree: {root}")
    print(f"functions over 100 lines (package code): {len(fns)}; with benchmarks/: {len(fns) + len(fns_b)}")
    print(f"modules over 500 lines (package code): {len(mods)}")
    print(f"compatibility modules: {len(compat)}")
    print(f"subpackage cycles: {subpackage_cycles(root)}")
    print(f"hand-kept key lists: {len(keys)} (own key lists, outside the schema's reach: {len(own_keys)})")
    print(f"mypy: {exempt} modules exempt ({errors} errors stated), {ignores} '# type: ignore' in package code")
    for title, rows in (
        ("long functions", fns + fns_b),
        ("long modules", mods),
        ("compatibility", compat),
        ("key lists", keys),
        ("own key lists", own_keys),
    ):
        for r in rows:
            print(f"  {title}: {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
