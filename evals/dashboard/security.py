"""Validation of everything the browser names: ids only ever map to files under the roots.

The browser never sends a path. It sends ids (a run's path relative to the runs root, a fit
record's path relative to the fits root) that must (1) be well-formed (no `..`, no absolute
paths, no odd characters), (2) be one the server itself listed, and (3) resolve, after
following symlinks, inside the root. Any failure is a 4xx, never a file read.
"""
from __future__ import annotations

import re
from pathlib import Path

_ID = re.compile(r"^[A-Za-z0-9_.=+,@-]+(/[A-Za-z0-9_.=+,@-]+)*$")
MAX_ID_LEN = 512


class BadId(ValueError):
    """An id that is malformed or points outside its root (-> HTTP 400)."""


class UnknownId(KeyError):
    """A well-formed id the server does not know (-> HTTP 404)."""


def check_id(raw: str) -> str:
    """Syntactic check: relative, '/'-separated, no '.'/'..' parts, a safe character set."""
    if not isinstance(raw, str) or not raw or len(raw) > MAX_ID_LEN:
        raise BadId("empty or over-long id")
    if not _ID.match(raw):
        raise BadId(f"invalid id {raw!r}")
    if any(part in (".", "..") for part in raw.split("/")):
        raise BadId(f"invalid id {raw!r} (relative path component)")
    return raw


def inside(root: Path, rel: str) -> Path:
    """root/rel, resolved; raises BadId if it escapes root (symlinks included)."""
    root_r = Path(root).resolve()
    p = (root_r / check_id(rel)).resolve()
    if p != root_r and root_r not in p.parents:
        raise BadId(f"{rel!r} is outside the served directory")
    return p


def resolve_known(root: Path, rel: str, known) -> Path:
    """A checked id that the server itself listed (`known`: a container of ids)."""
    check_id(rel)
    if rel not in known:
        raise UnknownId(rel)
    return inside(root, rel)
