"""Fit records under the fits root: listed, parsed (JSON only, never pickle) and cached by mtime.

A record that is not valid JSON or lacks `law`/`params` is listed as a problem, not an error;
run directories under the fits root (a fit's data kept beside it) are data, not records, and are skipped.
The data points behind a fit are re-read from the record's own `source` (CSV/Parquet/run tree)
through `scaling.data.inputs.load`, the same reader the fitter used, but only when that source lies
inside a served root (--runs or --fits, symlinks followed; a run tree must not link out either):
a record is data, and its `source` must not make the server read arbitrary files. When the
source is elsewhere or gone, the Scaling view still draws the fitted curves and says why the
points are missing, without naming the server path.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from dashboard.security import UnknownId, contained, escaping_links, resolve_known
from dashboard.stores import fit_data
from dashboard.stores.fit_checks import not_identified
from rundir.layout import CONFIG, EVALS, MARKERS, METRICS, SUMMARY
from scaling.core.errors import InputError
from scaling.fits.record import FitRecord

# the files the scaling readers open in a run tree (rglob: symlinked directories are not descended)
_TREE_FILES = {SUMMARY, CONFIG, METRICS, EVALS}


def _tree_file(p: Path) -> bool:
    """A run-tree entry a fit's reader may open: the run files, evals/ and each evals/<step>.json."""
    return p.name in _TREE_FILES or p.parent.name == EVALS


class FitStore:
    def __init__(self, root: str | Path | None, runs_root: str | Path | None = None):
        self.root = Path(root).resolve() if root else None
        self.runs_root = Path(runs_root).resolve() if runs_root else None
        self._cache: dict[str, tuple] = {}  # id -> (mtime_ns, size, record | None, problem | None)
        self._points: dict[tuple, tuple] = {}
        self._lock = threading.Lock()

    def _scan(self) -> dict[str, tuple]:
        if self.root is None or not self.root.is_dir():
            return {}
        out = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            if any(m in filenames for m in MARKERS):  # a run directory (a fit's data kept under --fits): no records
                dirnames[:] = []
                continue
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for fn in filenames:
                if not fn.endswith(".json") or fn.startswith("."):
                    continue
                p = Path(dirpath) / fn
                rid = p.relative_to(self.root).as_posix()
                try:
                    st = p.stat()
                except OSError:
                    continue
                if not contained(p, [self.root]):
                    out[rid] = (st.st_mtime_ns, st.st_size, None, "links outside the served fits directory; not read")
                    continue
                c = self._cache.get(rid)
                if c is None or c[:2] != (st.st_mtime_ns, st.st_size):
                    c = (st.st_mtime_ns, st.st_size, *self._parse(p))
                out[rid] = c
        return out

    @staticmethod
    def _parse(p: Path) -> tuple[dict | None, str | None]:
        try:
            rec = json.loads(p.read_text())
        except (ValueError, UnicodeDecodeError) as exc:
            return None, f"not valid JSON ({exc})"
        if not isinstance(rec, dict) or "law" not in rec or not isinstance(rec.get("params"), dict):
            return None, "not a fit record (needs 'law' and 'params')"
        try:
            return FitRecord.from_dict(rec), None
        except InputError as exc:  # a newer schema_version: listed as a problem, the others still served
            return None, str(exc)

    def listing(self) -> tuple[list[dict], list[dict]]:
        """([{id, law, approach, n_points, n_warnings, not_identified, by}], [{id, problem}])
        (by: the key of a --by record)."""
        with self._lock:
            self._cache = self._scan()
            items, problems = [], []
            for rid, (_, _, rec, problem) in sorted(self._cache.items()):
                if rec is None:
                    problems.append({"id": rid, "problem": problem})
                    continue
                items.append(
                    {
                        "id": rid,
                        "law": rec.get("law"),
                        "approach": rec.get("approach"),
                        "n_points": rec.get("n_points"),
                        "n_warnings": len(rec.get("warnings") or []),
                        "not_identified": bool(not_identified(rec)),
                        "by": rec.get("by"),
                    }
                )
            if self.root is not None and not self.root.is_dir():
                problems.append({"id": ".", "problem": "the fits directory (--fits) does not exist"})
            return items, problems

    def record(self, rid: str) -> dict:
        with self._lock:
            self._cache = self._scan()
            known = {k for k, v in self._cache.items() if v[2] is not None}
            if self.root is None:
                raise UnknownId(rid)
            resolve_known(self.root, rid, known)
            return self._cache[rid][2]

    @property
    def roots(self) -> list[Path]:
        return [r for r in (self.root, self.runs_root) if r is not None]

    def _source(self, src: str, rid: str | None) -> tuple[Path | None, str | None]:
        """The record's data source as a path inside a served root, or (None, why)."""
        raw = Path(src)
        if raw.is_absolute():
            cands = [raw]
        else:  # relative to where the fitter ran: try the record's folder and the roots
            rec_dir = (self.root / rid).parent if (self.root and rid) else None
            cands = [c / raw for c in (rec_dir, self.root, self.runs_root, Path.cwd()) if c is not None]
        seen = False
        for c in cands:
            if not os.path.lexists(c):
                continue
            seen = True
            if contained(c, self.roots):
                return c, None
        if seen:
            return None, "its data source is outside the served directories (--runs, --fits), so it is not read"
        return None, "its data source is not available on this machine"

    def points(self, rec: dict, rid: str | None = None) -> tuple[list[dict], str | None]:
        """The fitted data as rows (dashboard.stores.fit_data: per law), or a reason.
        `rid` (the record's id) lets a relative `source` resolve against the record's folder."""
        src = rec.get("source")
        if not src or src == "DataFrame" or not isinstance(src, str):
            return [], "the record does not name a data file"
        p, why = self._source(src, rid)
        if p is None:
            return [], why
        try:
            st = p.stat()
        except OSError:
            return [], "its data source is not available on this machine"
        key = (str(p), st.st_mtime_ns, st.st_size, json.dumps(rec.get("columns") or {}, sort_keys=True))
        if key not in self._points:
            out = escaping_links(p, self.roots, _tree_file) if p.is_dir() else []
            if out:  # a run tree that links out: refuse it whole rather than read half of it
                return (
                    [],
                    f"its data source links outside the served directories ({', '.join(out[:3])}), so it is not read",
                )
            try:
                self._points[key] = (fit_data.read(rec, p), None)
            except Exception as exc:  # a bad source must not break the view (the server scrubs paths from exc)
                self._points[key] = ([], f"could not read its data source: {exc}")
        return self._points[key]
