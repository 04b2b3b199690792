"""Validation of everything the browser names, and confinement of every read to the served roots.

The browser never sends a path. It sends ids (a run's path relative to the runs root, a fit
record's path relative to the fits root) that must (1) be well-formed (no `..`, no absolute
paths, no control characters), (2) be one the server itself listed, and (3) resolve, after
following symlinks, inside the root. Any failure is a 4xx, never a file read.

Files the server opens on its own (a run's summary.json/metrics.jsonl/evals, a fit record's data
`source`) go through `contained`: resolved (symlinks followed) and read only when inside a served
root. `scrub` keeps server paths out of every response: paths under a root become root-relative,
any other absolute path is replaced by `<server path>`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

MAX_ID_LEN = 512
# Anything printable is allowed in an id component (run names may have spaces or non-ASCII
# letters); the id must still be one the server listed and must resolve inside its root.
_FORBIDDEN = re.compile(r'[\x00-\x1f\x7f\\"]')


class BadId(ValueError):
    """An id that is malformed or points outside its root (-> HTTP 400)."""


class UnknownId(KeyError):
    """A well-formed id the server does not know (-> HTTP 404)."""


def check_id(raw: str) -> str:
    """Syntactic check: relative, '/'-separated, no empty/'.'/'..' parts, no control chars or backslash."""
    if not isinstance(raw, str) or not raw or len(raw) > MAX_ID_LEN:
        raise BadId("empty or over-long id")
    if _FORBIDDEN.search(raw) or raw.startswith("/"):
        raise BadId(f"invalid id {raw!r}")
    if any(part in ("", ".", "..") for part in raw.split("/")):
        raise BadId(f"invalid id {raw!r} (empty or relative path component)")
    return raw


def _under(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def contained(path: str | Path, roots) -> bool:
    """True if `path`, with every symlink followed, lies inside one of the (resolved) `roots`."""
    try:
        p = Path(path).resolve()
    except (OSError, RuntimeError):  # symlink loop
        return False
    return any(r is not None and _under(p, Path(r)) for r in roots)


def escaping_links(tree: Path, roots, names=None) -> list[str]:
    """Symlinks under `tree` (not followed while walking) whose target is outside `roots`,
    as paths relative to `tree`; only entries named in `names` (a set of names, or a predicate
    on the entry's path) when given."""
    out = []
    keep = names if callable(names) else (lambda p: names is None or p.name in names)
    for dirpath, dirnames, filenames in os.walk(tree):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            if keep(p) and p.is_symlink() and not contained(p, roots):
                out.append(p.relative_to(tree).as_posix())
    return out


def inside(root: Path, rel: str) -> Path:
    """root/rel, resolved; raises BadId if it escapes root (symlinks included)."""
    root_r = Path(root).resolve()
    p = (root_r / check_id(rel)).resolve()
    if not _under(p, root_r):
        raise BadId(f"{rel!r} is outside the served directory")
    return p


def resolve_known(root: Path, rel: str, known) -> Path:
    """A checked id that the server itself listed (`known`: a container of ids)."""
    check_id(rel)
    if rel not in known:
        raise UnknownId(rel)
    return inside(root, rel)


_ABS_PATH = re.compile(r"(?<![\w.~%@+/-])(?:/[^\s'\"<>|,;:()\[\]{}/]+){2,}/?")


class Scrubber:
    """Rewrites text so that no absolute server path leaves the server (see module doc)."""

    def __init__(self, roots):
        prefixes = set()
        for r in roots:
            if r is None:
                continue
            for form in (Path(r).absolute(), Path(r).resolve()):
                prefixes.add(str(form).rstrip("/"))
        self._prefixes = sorted((p for p in prefixes if p), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        if "/" not in text:
            return text
        for p in self._prefixes:
            if p in text:
                text = re.sub(
                    re.escape(p) + r"(?:/|(?![\w.-]))", lambda m: "" if m.group(0).endswith("/") else ".", text
                )
        return _ABS_PATH.sub("<server path>", text)
