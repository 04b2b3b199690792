"""Import cycles between the project's modules and between its subpackages, function-level imports included.

import-linter checks the layers between packages; this checks that no two modules import each
other, however indirectly and wherever the import statement sits (module top or inside a
function), and that no two subpackages do (`pretrain.config`, `launch.sweep`: a folder with an
`__init__.py` one level inside a package; a module of one importing a module of the other is an edge).
Imports under `if TYPE_CHECKING:` are left out: they never run.

    python .ci/import_cycles.py                 # both checks; lists each cycle; exit 1 if one is not allowed
    python .ci/import_cycles.py --count         # the number of modules in cycles, and of cycles
    python .ci/import_cycles.py --subpackages   # the subpackage check alone, each cycle's edges

A cycle is a strongly connected component of the graph (Tarjan); each is printed as one loop
through it. A subpackage cycle that cannot be broken yet is listed in SUBPACKAGE_CYCLES_ALLOWED
with the reason; an entry whose cycle is gone fails the check too, so the list only shrinks.
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


# Subpackage cycles not broken yet, each with why (a set of subpackages that import each other). Empty since the
# last one (pretrain config <-> checkpoint <-> data) was broken: keep it so.
SUBPACKAGE_CYCLES_ALLOWED: dict[frozenset[str], str] = {}


def subpackages(modules) -> set[str]:
    """`pkg.sub` for every folder with an `__init__.py` one level inside a top-level package."""
    return {m for m, path in modules.items() if path.name == "__init__.py" and m.count(".") == 1}


def subpackage_graph(g: dict[str, set[str]], subs: set[str]) -> tuple[dict[str, set[str]], dict]:
    """The subpackage graph of the module graph `g`, and for each of its edges the module imports behind it."""
    unit = lambda m: ".".join(m.split(".")[:2]) if ".".join(m.split(".")[:2]) in subs else None  # noqa: E731
    out: dict[str, set[str]] = {s: set() for s in subs}
    why: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for m, targets in g.items():
        a = unit(m)
        for t in targets:
            b = unit(t)
            if a and b and a != b:
                out[a].add(b)
                why.setdefault((a, b), []).append((m, t))
    return out, why


def check_subpackages(g: dict[str, set[str]], verbose: bool) -> int:
    """Print the subpackage cycles; the number that are not allowed, plus allow-list entries no longer needed."""
    sg, why = subpackage_graph(g, subpackages(project_modules()))
    found = cycles(sg)
    bad = 0
    for comp in found:
        reason = SUBPACKAGE_CYCLES_ALLOWED.get(frozenset(comp))
        print(("allowed: " if reason else "") + " -> ".join(loop(comp, sg)))
        if reason is None:
            bad += 1
        if verbose or reason is None:
            for a in comp:
                for b in sorted(sg[a] & set(comp)):
                    print(f"    {a} -> {b}: " + ", ".join(f"{m} imports {t}" for m, t in sorted(why[(a, b)])))
    for entry in SUBPACKAGE_CYCLES_ALLOWED:
        if sorted(entry) not in found:
            print(
                "allow-list entry no longer needed (remove it from SUBPACKAGE_CYCLES_ALLOWED): "
                + ", ".join(sorted(entry))
            )
            bad += 1
    allowed = sum(frozenset(c) in SUBPACKAGE_CYCLES_ALLOWED for c in found)
    print(f"{len(found)} subpackage cycles ({allowed} allowed: SUBPACKAGE_CYCLES_ALLOWED in .ci/import_cycles.py)")
    return bad


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", action="store_true", help="print only the counts")
    p.add_argument("--subpackages", action="store_true", help="only the cycles between subpackages, with their edges")
    a = p.parse_args(argv)
    g = graph()
    if a.subpackages:
        return 1 if check_subpackages(g, verbose=True) else 0
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
    bad = check_subpackages(g, verbose=False) if not a.count else 0
    return 1 if found or bad else 0


if __name__ == "__main__":
    sys.exit(main())
