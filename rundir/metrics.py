"""`metrics.jsonl`: one JSON record per log step, appended by the trainer, read by everyone else.

The file is append-only while a run trains; on resume the records past the checkpoint are
dropped, so it always reads as one clean run (steps increasing). A run killed mid-write leaves
a torn last line: every reader here skips it.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from rundir.files import atomic_write_text


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else (1e308 if v > 0 else -1e308)
    return v


class MetricsFile:
    """The trainer's writer: line-buffered appends; `resume_step` keeps the records up to it."""

    def __init__(self, path: Path, resume_step: int | None):
        self.path = path
        if resume_step is not None and path.exists():
            keep = [ln for ln in path.read_text().splitlines() if ln.strip() and _step(ln) <= resume_step]
            atomic_write_text(path, "".join(ln + "\n" for ln in keep))
        elif resume_step is None and path.exists():
            path.unlink()  # fresh run in a reused directory
        self._f = open(path, "a", buffering=1)

    def write(self, record: dict) -> None:
        self._f.write(json.dumps({k: _clean(v) for k, v in record.items()}) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def _step(line: str) -> int:
    try:
        return int(json.loads(line).get("step", 0))
    except (json.JSONDecodeError, TypeError, ValueError):
        return 1 << 62  # a torn last line from a killed run: drop it


def read_metrics(path: Path) -> list[dict]:
    """Every record of a metrics.jsonl (a missing file is empty; torn lines are dropped)."""
    out: list[dict] = []
    try:
        text = Path(path).read_text()
    except (FileNotFoundError, NotADirectoryError):
        return out
    for ln in text.splitlines():
        try:
            out.append(json.loads(ln))
        except json.JSONDecodeError:
            continue
    return out


def last_record(path: Path, chunk: int = 8192) -> dict | None:
    """The last complete JSON line of metrics.jsonl, read from the file's tail only."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - chunk))
            data = f.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    for line in reversed(data.splitlines()):
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(rec, dict):
            return rec
    return None


class MetricsTail:
    """metrics.jsonl read incrementally for a long-lived reader: new complete lines only; starts
    over when the file is truncated or replaced (a resume rewrites it)."""

    def __init__(self, path: Path):
        self.path, self.offset, self.bad_lines = path, 0, 0
        self.ino: int | None = None
        self.records: list[dict] = []

    def read(self) -> list[dict]:
        try:
            st = os.stat(self.path)
        except OSError:
            self.offset, self.records = 0, []
            return self.records
        if st.st_ino != self.ino or st.st_size < self.offset:
            self.offset, self.ino, self.records, self.bad_lines = 0, st.st_ino, [], 0
        if st.st_size > self.offset:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(st.st_size - self.offset)
            end = data.rfind(b"\n")
            if end >= 0:  # the bytes after the last newline are a line still being written
                for line in data[: end + 1].splitlines():
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except (ValueError, UnicodeDecodeError):
                        self.bad_lines += 1
                        continue
                    if isinstance(rec, dict):
                        self.records.append(rec)
                self.offset += end + 1
        return self.records
