"""Cached, incremental reading of a runs root for the dashboard.

Rows come from the run registry (`rundir.read.read_run`, the one reader of the run-directory
contract); this module only adds what a long-lived server needs on top:
  * a per-run cache keyed by the (mtime, size) of the files a row depends on, so a refresh
    re-reads only the runs that changed (1,000 finished runs: one stat pass, no parsing);
  * unfinished runs (no summary.json) are always re-read, so status/progress stay live;
  * metrics.jsonl is read incrementally from the last complete line (append-only contract),
    a torn last line is left for the next read;
  * evals/<step>.json files are cached by mtime.
Nothing here writes anywhere.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from dashboard.security import contained, resolve_known
from dashboard.stores import lineage
from rundir import read  # the run registry: row contract and dir discovery
from rundir.files import read_yaml
from rundir.layout import CONFIG, LAUNCH_CONFIG, LOCK, METRICS, SUMMARY, RunDir, eval_step
from rundir.metrics import MetricsTail
from scaling.data.moe_inputs import moe_from_config

_KEY_FILES = (SUMMARY, CONFIG, LAUNCH_CONFIG, METRICS)  # every file the registry reads
# Columns the Runs view shows first (the registry may add more; all are sent).
TABLE_COLUMNS = [
    "id",
    "sweep",
    "run",
    "branch_of",
    "branch_step",
    "model",
    "params",
    "active_params",
    "tokens",
    "epochs",
    "batch_size",
    "batch_tokens",
    "lr",
    "optim",
    "router",
    "num_experts",
    "top_k",
    "status",
    "steps",
    "total_steps",
    "final_loss",
    "final_val_loss",
    "tokens_per_s",
    "mfu",
    "wall_s",
    "n_evals",
    "problem",
]


def _stat_key(run_dir: Path) -> tuple:
    out = []
    for name in _KEY_FILES:
        try:
            st = os.stat(run_dir / name)
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def _num_or_none(v: Any) -> Any:
    """NaN -> None (the registry returns plain JSON/YAML values, never numpy scalars)."""
    return None if isinstance(v, float) and v != v else v


class RunStore:
    """All runs under `root`, refreshed at most every `min_interval` seconds."""

    def __init__(self, root: str | Path, min_interval: float = 1.0):
        self.root = Path(root).resolve()
        self.min_interval = min_interval
        self._rows: dict[str, tuple[tuple, dict | None, str | None]] = {}  # id -> (key, row, problem)
        self._metrics: dict[str, MetricsTail] = {}
        self._evals: dict[str, tuple] = {}  # path -> (mtime_ns, size, doc|problem)
        self._shapes: dict[str, tuple] = {}  # id -> (key, MoE shape)
        self._last = 0.0
        self._lock = threading.Lock()
        self.last_refresh_s = 0.0

    # ------------------------------------------------------------------ table
    def refresh(self, force: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            if not force and self._rows and now - self._last < self.min_interval:
                return
            t0 = time.perf_counter()
            seen = {}
            dirs = read.find_run_dirs(self.root) if self.root.is_dir() else []
            for d in dirs:
                rid = d.relative_to(self.root).as_posix() or "."
                key = _stat_key(d)
                old = self._rows.get(rid)
                cacheable = key[0] is not None  # summary.json present: the run has ended
                if old is not None and old[0] == key and cacheable:
                    seen[rid] = old
                    continue
                seen[rid] = (key, *self._read(d, rid))
            self._rows = seen
            self._last = time.monotonic()
            self.last_refresh_s = time.perf_counter() - t0

    def _read(self, d: Path, rid: str) -> tuple[dict | None, str | None]:
        # a symlink in a run directory is followed only when it stays inside the runs root
        escaped = [n for n in (*_KEY_FILES, LOCK) if self._links_out(d / n)]  # the status probe opens the lock
        if escaped:
            return None, f"{', '.join(escaped)} links outside the served runs directory; not read"
        try:
            row, problem = read.read_run(d)
        except Exception as exc:  # one bad directory never stops the scan
            return None, f"{type(exc).__name__}: {exc}"
        if row is None:
            return None, problem
        row = {k: _num_or_none(v) for k, v in row.items()}
        row["id"] = rid
        row.pop("path", None)  # never send server paths to the browser
        # a branch's parent as a run id (the registry gives its directory): the runs table's lineage
        row["branch_of"], row["branch_served"] = lineage.branch_of(row.pop("init_from", None), self.root)
        if row.get("num_experts"):
            row["router"] = self._router(d)
        row["n_evals"] = len(self._eval_files(d))
        if problem:
            row["problem"] = problem
        return row, problem

    @staticmethod
    def _router(d: Path) -> str | None:
        try:
            cfg = read_yaml(d / CONFIG) or {}
            return ((cfg.get("model") or {}).get("moe") or {}).get("router")
        except Exception:
            return None

    def moe_shapes(self) -> dict[str, dict]:
        """{run id: {granularity, expansion}} of the MoE runs, counted from each model config the way
        `scalelab fit moe` counts them (scaling.data.moe_inputs), on demand (the MoE view: the Runs view
        does not pay for it) and cached by the same file keys as the rows."""
        self.refresh()
        with self._lock:
            out = {}
            for rid, (key, row, _) in self._rows.items():
                if row is None or not row.get("num_experts"):
                    continue
                got = self._shapes.get(rid)
                if got is None or got[0] != key:
                    got = self._shapes[rid] = (key, self._moe_shape(self.root / rid))
                out[rid] = got[1]
            return out

    @staticmethod
    def _moe_shape(d: Path) -> dict:

        moe, _ = moe_from_config(d)
        return {"granularity": moe.get("granularity"), "expansion": moe.get("expansion")} if moe else {}

    def table(self) -> tuple[list[dict], list[dict]]:
        """(rows, problems); problems are {id, problem} for dirs that are malformed or half-written."""
        self.refresh()
        rows, problems = [], []
        for rid, (_, row, problem) in sorted(self._rows.items()):
            if row is not None:
                rows.append(row)
            if problem:
                problems.append({"id": rid, "problem": problem})
        if not self.root.is_dir():
            problems.append({"id": ".", "problem": "the runs directory (--runs) does not exist"})
        return rows, problems

    def _links_out(self, p: Path) -> bool:
        """p is a symlink leading outside the root. Only links need resolving: run dirs come from a
        walk that does not follow links (or from run_dir, resolved), so a plain entry is inside."""
        return os.path.islink(p) and not contained(p, [self.root])

    def _eval_files(self, d: Path) -> list[Path]:
        """evals/*.json of a run that resolve inside the runs root (a linked-out file is skipped)."""
        ev = RunDir(d).evals
        if not ev.is_dir() or self._links_out(ev):
            return []
        return [p for p in sorted(ev.glob("*.json")) if not self._links_out(p)]

    def ids(self) -> set[str]:
        self.refresh()
        return {rid for rid, (_, row, _) in self._rows.items() if row is not None}

    def row(self, rid: str) -> dict:
        self.run_dir(rid)
        return self._rows[rid][1]

    def run_dir(self, rid: str) -> Path:
        return resolve_known(self.root, rid, self.ids())

    # ---------------------------------------------------------------- per run
    def metrics(self, rid: str) -> tuple[list[dict], int]:
        """(records, bad_line_count) of the run's metrics.jsonl, read incrementally."""
        d = self.run_dir(rid)
        with self._lock:
            tail = self._metrics.get(rid)
            if tail is None:
                tail = self._metrics[rid] = MetricsTail(d / METRICS)
            if self._links_out(tail.path):  # re-checked each read: the link may change
                return [], 0
            return list(tail.read()), tail.bad_lines

    def evals(self, rid: str) -> list[dict]:
        """Every evals/<step>.json of the run as {step, tokens, doc | problem}, sorted by step."""
        out = []
        for p in self._eval_files(self.run_dir(rid)):
            try:
                st = p.stat()
            except OSError:
                continue
            c = self._evals.get(str(p))
            if c is None or c[:2] != (st.st_mtime_ns, st.st_size):
                try:
                    doc = json.loads(p.read_text())
                    if not isinstance(doc, dict):
                        raise ValueError("not a JSON object")
                    c = (st.st_mtime_ns, st.st_size, doc, None)
                except (ValueError, UnicodeDecodeError) as exc:
                    c = (st.st_mtime_ns, st.st_size, None, f"{p.name}: unreadable ({exc})")
                self._evals[str(p)] = c
            doc, problem = c[2], c[3]
            step = doc.get("step") if doc else None
            if step is None:
                step = eval_step(p.name)
            out.append({"step": step, "file": p.name, "doc": doc, "problem": problem})
        out.sort(key=lambda e: (e["step"] is None, e["step"] or 0))
        return out
