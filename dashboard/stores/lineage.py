"""Branches (`train.init_from`) in the dashboard: which run each branch starts from, as a run id, and
the families (a stable run and every run branched from it, at any depth) the curves view draws.

Lineage comes from the registry rows (`rundir.read`: `init_from` is the parent's run directory,
`branch_step` its step); nothing here reads another file. A parent outside the served runs root
is named by its folder name only (no server path leaves the server) and has no curve here.
"""

from __future__ import annotations

import os
from pathlib import Path

from dashboard.security import contained


def branch_of(init_from: str | None, root: Path) -> tuple[str | None, bool]:
    """(the parent's run id, whether it is served): root-relative when the parent lies inside
    `root`, else its folder name."""
    if not init_from:
        return None, False
    p = Path(init_from)
    if not p.is_absolute():
        p = root / p
    if contained(p, [root]):
        return Path(os.path.realpath(p)).relative_to(root).as_posix(), True
    return p.name, False


def family_root(rid: str, parents: dict[str, str]) -> str:
    """The run at the start of `rid`'s lineage (the stable run of a WSD study); cycles stop."""
    seen = {rid}
    while rid in parents and parents[rid] not in seen:
        rid = parents[rid]
        seen.add(rid)
    return rid


def with_families(ids: list[str], rows: list[dict], limit: int) -> list[str]:
    """`ids` plus every run of their families: the family's root first, then its branches by branch
    step (a family's runs stay together), at most `limit` ids, the requested ones kept first."""
    parents = {r["id"]: r["branch_of"] for r in rows if r.get("branch_of") and r.get("branch_served")}
    step = {r["id"]: r.get("branch_step") or 0 for r in rows}
    roots = {rid: family_root(rid, parents) for rid in step}
    out: list[str] = []
    for rid in ids:
        root = roots.get(rid, rid)
        members = [root] + sorted((m for m, r in roots.items() if r == root and m != root), key=lambda m: (step[m], m))
        for m in members if rid in roots else [rid]:
            if m not in out:
                out.append(m)
    keep = [i for i in out if i in ids] + [i for i in out if i not in ids]
    return [i for i in out if i in keep[:limit]]


def join_point(parent_records: list[dict], step: int | None, keys, panels) -> dict | None:
    """Where the branch's curves join the parent's (its metrics start at step N+1): per panel (a
    metric such as loss or val_loss), the parent's last record at or before the branch step that
    logged it, as {key: value}. Validation is logged more rarely than the training loss."""
    if step is None:
        return None
    out = {}
    for panel in panels:
        best = None
        for r in parent_records:
            s = r.get("step")
            if (
                isinstance(s, (int, float))
                and s <= step
                and r.get(panel) is not None
                and (best is None or s >= best["step"])
            ):
                best = r
        out[panel] = {k: best.get(k) for k in keys} if best else None
    return out
