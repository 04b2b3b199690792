""".ci/import_cycles.py's subpackage mode: a cycle between two subpackages is found through any of their
modules, an allowed one passes only while it exists, and the tree has none (its allow-list is empty)."""

from __future__ import annotations

import functools

from tests.helpers import load_script


@functools.cache
def load():
    return load_script(".ci/import_cycles.py")


@functools.cache
def tree_graph():
    return load().graph()


def test_a_cycle_between_subpackages_is_found_through_their_modules():
    ic = load()
    g = {"p.a.x": {"p.b.y"}, "p.b.y": set(), "p.b.z": {"p.a.w"}, "p.a.w": set(), "p.top": {"p.a.x"}}
    assert ic.cycles(g) == []  # no module cycle
    sg, why = ic.subpackage_graph(g, {"p.a", "p.b"})
    assert ic.cycles(sg) == [["p.a", "p.b"]]
    assert why[("p.b", "p.a")] == [("p.b.z", "p.a.w")]


def test_the_tree_has_no_subpackage_cycle_and_allows_none(capsys):
    ic = load()
    assert ic.SUBPACKAGE_CYCLES_ALLOWED == {}
    assert ic.check_subpackages(tree_graph(), verbose=False) == 0
    assert "0 subpackage cycles (0 allowed" in capsys.readouterr().out


def test_an_allow_list_entry_whose_cycle_is_gone_fails(monkeypatch, capsys):
    ic = load()
    monkeypatch.setitem(ic.SUBPACKAGE_CYCLES_ALLOWED, frozenset({"models.moe", "scaling.fits"}), "never a cycle")
    assert ic.check_subpackages(tree_graph(), verbose=False) == 1
    assert "no longer needed" in capsys.readouterr().out
