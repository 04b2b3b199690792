"""Append-only metrics.jsonl. On resume the records past the checkpoint are dropped, so the
file always reads as one clean run (a record per log step, steps increasing)."""
from __future__ import annotations

import json
import math
from pathlib import Path

from pretrain.run_dir import atomic_write_text


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else (1e308 if v > 0 else -1e308)
    return v


class MetricsFile:
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
    out = []
    if not path.exists():
        return out
    for ln in path.read_text().splitlines():
        try:
            out.append(json.loads(ln))
        except json.JSONDecodeError:
            continue
    return out
