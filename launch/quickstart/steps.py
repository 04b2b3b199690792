"""A step of the main job as data: the `scalelab` command it runs, the files it reads and the files it
writes. It reruns when what it would compute changes, never because a file is newer.

A step's fingerprint is a sha256 over its command line (the settings: bootstrap draws, seed,
conventions, budget) and the path and content hash of each input that exists (a fit record, a
run's summary.json). After a successful run the fingerprint is kept beside its first output, in
`.steps/<output>.json` with the input hashes, so a person can see why a step reran (a hidden folder:
the dashboard and the notebooks, which read every record in a fits folder, never see it). The step is up
to date while every output exists and the kept fingerprint equals the current one: touching a file,
copying the folder or a clock skew between hosts reruns nothing, while a changed setting, a changed
input, or a run added or removed does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rundir.files import atomic_write_json, read_json


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class Step:
    """One `scalelab` command of the main job: `argv` (after `scalelab`), what it reads, what it writes."""

    name: str
    argv: tuple[str, ...]
    inputs: tuple[Path, ...] = ()
    outputs: tuple[Path, ...] = ()

    @classmethod
    def of(cls, name: str, argv: Sequence, inputs: Sequence[Path] = (), outputs: Sequence[Path] = ()) -> Step:
        return cls(name, tuple(map(str, argv)), tuple(map(Path, inputs)), tuple(map(Path, outputs)))

    def input_hashes(self) -> dict[str, str | None]:
        """Each input's sha256; None for one that does not exist (an optional fit that failed)."""
        return {str(p): file_sha256(p) if p.is_file() else None for p in self.inputs}

    def fingerprint(self, hashes: dict[str, str | None] | None = None) -> str:
        hashes = self.input_hashes() if hashes is None else hashes
        blob = json.dumps({"argv": list(self.argv), "inputs": hashes}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def stamp(self) -> Path:
        """Where the fingerprint of the last successful run is kept (beside the first output)."""
        first = self.outputs[0]
        return first.parent / ".steps" / f"{first.name}.json"

    def up_to_date(self) -> bool:
        if not self.outputs or not all(p.exists() for p in self.outputs):
            return False
        kept = read_json(self.stamp) or {}
        return kept.get("fingerprint") == self.fingerprint()

    def record(self) -> None:
        """Keep the fingerprint of a run that succeeded."""
        hashes = self.input_hashes()
        atomic_write_json(
            self.stamp,
            {"step": self.name, "fingerprint": self.fingerprint(hashes), "argv": list(self.argv), "inputs": hashes},
        )

    def run(self, scalelab: Callable[..., int], allow_fail: bool = False) -> int | None:
        """Run the step through `scalelab` unless it is up to date (None); its exit code otherwise."""
        if self.up_to_date():
            print(f"{self.name}: up to date ({', '.join(p.name for p in self.outputs)})", flush=True)
            return None
        code = scalelab(*self.argv, allow_fail=allow_fail)
        if code == 0:
            self.record()
        return code
