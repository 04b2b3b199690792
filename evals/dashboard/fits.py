"""Fit records under the fits root: listed, parsed (JSON only, never pickle) and cached by mtime.

A record that is not valid JSON or lacks `law`/`params` is listed as a problem, not an error.
The data points behind a fit are re-read from the record's own `source` (CSV/Parquet/run tree)
through `scaling.inputs.load`, the same reader the fitter used; when that source is gone the
Scaling view still draws the fitted curves and says why the points are missing.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from evals.dashboard.security import resolve_known


class FitStore:
    def __init__(self, root: str | Path | None):
        self.root = Path(root).resolve() if root else None
        self._cache: dict[str, tuple] = {}  # id -> (mtime_ns, size, record | None, problem | None)
        self._points: dict[tuple, tuple] = {}
        self._lock = threading.Lock()

    def _scan(self) -> dict[str, tuple]:
        if self.root is None or not self.root.is_dir():
            return {}
        out = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
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
        return rec, None

    def listing(self) -> tuple[list[dict], list[dict]]:
        """([{id, law, approach, n_points, warnings}], [{id, problem}])."""
        with self._lock:
            self._cache = self._scan()
            items, problems = [], []
            for rid, (_, _, rec, problem) in sorted(self._cache.items()):
                if rec is None:
                    problems.append({"id": rid, "problem": problem})
                    continue
                items.append({"id": rid, "law": rec.get("law"), "approach": rec.get("approach"),
                              "n_points": rec.get("n_points"), "n_warnings": len(rec.get("warnings") or [])})
            if self.root is not None and not self.root.is_dir():
                problems.append({"id": ".", "problem": f"fits root {self.root} does not exist"})
            return items, problems

    def record(self, rid: str) -> dict:
        with self._lock:
            self._cache = self._scan()
            known = {k for k, v in self._cache.items() if v[2] is not None}
            if self.root is None:
                from evals.dashboard.security import UnknownId

                raise UnknownId(rid)
            resolve_known(self.root, rid, known)
            return self._cache[rid][2]

    def points(self, rec: dict) -> tuple[list[dict], str | None]:
        """The fitted data as canonical rows (N, D, loss, flops, lr, batch_tokens, steps), or a reason."""
        src = rec.get("source")
        if not src or src == "DataFrame":
            return [], "the record does not name a data file"
        p = Path(src)
        try:
            st = p.stat()
        except OSError:
            return [], f"data source {src} is not available on this machine"
        key = (str(p), st.st_mtime_ns, st.st_size, json.dumps(rec.get("columns") or {}, sort_keys=True))
        if key not in self._points:
            try:
                from scaling.inputs import load

                ds = load(p, columns=None if p.is_dir() else (rec.get("columns") or None),
                          n_kind=_n_kind(rec))
                df = ds.df
                keep = [c for c in ("N", "D", "loss", "flops", "lr", "batch_tokens", "steps", "run") if c in df.columns]
                self._points[key] = (df[keep].to_dict("records"), None)
            except Exception as exc:  # a bad source must not break the view
                self._points[key] = ([], f"could not read {src}: {exc}")
        return self._points[key]


def _n_kind(rec: dict) -> str:
    kind = str(rec.get("n_kind") or "total")
    for k in ("non_embedding", "active", "total"):
        if kind.startswith(k):
            return k
    return "total"
