"""Import cycles between the project's modules, function-level imports included.

import-linter checks the layers between packages; this checks that no two modules import each
other, however indirectly and wherever the import statement sits (module top or inside a
function). Imports under `if TYPE_CHECKING:` are left out: they never run.

    python .ci/import_cycles.py            # lists each cycle; exit 1 if there is one
    python .ci/import_cycles.py --count    # the number of modules in cycles, and of cycles

A cycle is a strongly connected component of the module graph (Tarjan); each is printed as one
loop through it.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("base", "models", "rundir", "pretrain", "scaling", "evals", "launch", "dashboard")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")) if (ROOT / pkg).is_dir() else ():
            out[module_name(path)] = path
    return out


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, at any depth of its code."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def resolve(target: str) -> str | None:
        while target and target not in modules:  # `a.b.C` (a name in module a.b) -> a.b
            target = target.rpartition(".")[0]
        return target or None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(resolve(alias.name))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name if is_pkg else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    pkg = pkg.rpartition(".")[0]
                base = f"{pkg}.{base}" if base else pkg
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else resolve(base))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(None)
    found.discard(name)
    return found


JS_ROOT = ROOT / "dashboard" / "static"
JS_IMPORT = re.compile(r"""^\s*import\s[^'"]*['"](\.{1,2}/[^'"]+)['"]""", re.M)


def js_graph() -> dict[str, set[str]]:
    """The dashboard's ES modules (`import ... from "./x.js"`), named by their path under static/."""
    out = {}
    for path in sorted(JS_ROOT.rglob("*.js")):
        name = "dashboard/static/" + path.relative_to(JS_ROOT).as_posix()
        out[name] = {
            "dashboard/static/" + (path.parent / rel).resolve().relative_to(JS_ROOT.resolve()).as_posix()
            for rel in JS_IMPORT.findall(path.read_text())
        }
    return out


def graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports(path, name, modules) for name, path in modules.items()} | js_graph()


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in g:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(g[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def loop(comp: list[str], g: dict[str, set[str]]) -> list[str]:
    """One closed path through a component, starting at its first module (breadth-first)."""
    members = set(comp)
    start = comp[0]
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for m in frontier:
            for t in sorted(g[m] & members):
                if t == start:
                    path = [m]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, m, start]
                if t not in prev:
                    prev[t] = m
                    nxt.append(t)
        frontier = nxt
    return comp


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", action="store_true", help="print only the counts")
    a = p.parse_args(argv)
    g = graph()
    found = cycles(g)
    n_modules = sum(len(c) for c in found)
    if a.count:
        print(
            f"{len(found)} import cycles through {n_modules} modules ({len(g)} modules: Python, function-level imports "
            "included, and the dashboard's JS)"
        )
    else:
        for comp in found:
            print(
                " -> ".join(loop(comp, g))
                + (
                    f"   (+{len(comp) - len(set(loop(comp, g)))} more in this cycle)"
                    if len(comp) > len(set(loop(comp, g)))
                    else ""
                )
            )
        print(f"{len(found)} import cycles through {n_modules} modules")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
