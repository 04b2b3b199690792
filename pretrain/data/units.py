"""Cutting a corpus into units of work, and reading one unit's documents.

A unit is a contiguous part of the document stream that can be read on its own and yields exactly
the documents the whole-corpus stream yields there, in the same order:

- a byte range of an uncompressed JSON Lines file, cut at a line end (one row per line);
- a byte range of an uncompressed plain-text file, cut right after a `data.doc_delimiter` line
  (the delimiter ends a document and resets the paragraph cutter, so reading may restart there);
- a run of row groups of a Parquet file;
- a whole file (compressed files, .json arrays, plain text without a delimiter, small files);
- a whole source (Hugging Face data sets, and sources with `max_documents`, whose cap spans files).

Lines are decoded as `readers.iter_lines` does from the start of the file: UTF-8 until the first
line that is not valid UTF-8, Latin-1 from there on. A range that starts later is told where that
line is (`latin1_from`, found when the file is cut), so its text is decoded the same way.
Tasks are runs of consecutive units, so the tasks' streams, concatenated in task order, are the
stream of a one-task preparation.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from pretrain.data.config import DataConfig
from pretrain.data.normalize import cut_lines, normalize_line, normalize_text
from pretrain.data.readers import COMPRESSED, iter_lines_range, iter_parquet_texts, jsonl_texts, strip_compression
from pretrain.data.sources import Document, ResolvedSource, file_documents, iter_documents

SCAN_BYTES = 16 << 20  # read size when looking for the first line that is not UTF-8


@dataclass(frozen=True)
class Unit:
    which: str  # "sources" or "val_sources"
    source: int  # index in data.<which>
    file: int | None  # index in the source's files; None: the whole source
    kind: str  # "whole" | "bytes" | "rows"
    start: int = 0  # bytes: offset; rows: first row group
    end: int | None = None  # bytes: offset past the range; rows: row group past the run; None: to the end
    latin1_from: int | None = None  # bytes: lines from this offset on are decoded as Latin-1
    size: int = 0  # bytes of input (an estimate for row groups), for balancing and progress

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Unit:
        return cls(**d)


def _text_kind(path: Path) -> str | None:
    """'jsonl' or 'txt' for uncompressed files a byte range can cut, else None (read whole)."""
    name = path.name
    if name.endswith(COMPRESSED):
        return None
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if strip_compression(name).endswith((".json", ".parquet")):
        return None
    return "txt"


def first_latin1_line(path: Path) -> int | None:
    """Offset of the first line that is not valid UTF-8 (where `iter_lines` turns to Latin-1), or None."""
    offset, carry = 0, b""
    with open(path, "rb") as fh:
        while True:
            block = fh.read(SCAN_BYTES)
            data = carry + block
            cut = len(data) if not block else data.rfind(b"\n") + 1  # whole lines only, but the last block
            if cut == 0 and block:
                carry = data
                continue
            chunk, carry = data[:cut], data[cut:]
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError as exc:
                return offset + chunk.rfind(b"\n", 0, exc.start) + 1
            offset += len(chunk)
            if not block:
                return None


def _is_delimiter(raw: bytes, delimiter: str, latin1: bool) -> bool:
    try:
        line = raw.decode("latin-1" if latin1 else "utf-8")
    except UnicodeDecodeError:
        line = raw.decode("latin-1")
    return normalize_line(line).strip() == delimiter


def _cut_after(fh, target: int, kind: str, delimiter: str | None, latin1_from: int | None, end: int) -> int | None:
    """The first offset >= target where a unit may start (after a line end / a delimiter line), or None."""
    fh.seek(max(0, target - 1))
    pos = max(0, target - 1)
    if pos > 0:
        pos += len(fh.readline())  # finish the line that holds target - 1
    else:
        fh.seek(0)
    if kind == "jsonl":
        return pos if pos < end else None
    while pos < end:  # plain text: right after the next delimiter line
        raw = fh.readline()
        if not raw:
            return None
        latin1 = latin1_from is not None and pos >= latin1_from
        pos += len(raw)
        if raw.endswith(b"\n") and _is_delimiter(raw, delimiter or "", latin1):
            return pos if pos < end else None
    return None


def _byte_units(which: str, index: int, fi: int, path: Path, kind: str, pieces: int, delimiter: str | None):
    size = path.stat().st_size
    latin1_from = first_latin1_line(path)
    cuts = [0]
    with open(path, "rb") as fh:
        for j in range(1, pieces):
            # look for a cut up to the next piece's target only: a file without delimiters is read once
            at = _cut_after(
                fh, max(cuts[-1] + 1, size * j // pieces), kind, delimiter, latin1_from, size * (j + 1) // pieces
            )
            if at is not None and at > cuts[-1]:
                cuts.append(at)
    cuts.append(size)
    return [
        Unit(
            which, index, fi, "bytes", a, b, latin1_from if latin1_from is not None and latin1_from < b else None, b - a
        )
        for a, b in zip(cuts[:-1], cuts[1:])
    ]


def _row_units(which: str, index: int, fi: int, path: Path, pieces: int) -> list[Unit]:
    import pyarrow.parquet as pq  # deferred: only Parquet inputs need pyarrow

    meta = pq.ParquetFile(path).metadata
    groups = meta.num_row_groups
    size = path.stat().st_size
    if groups <= 1 or pieces <= 1:
        return [Unit(which, index, fi, "whole", size=size)]
    bounds = sorted({round(groups * j / min(pieces, groups)) for j in range(min(pieces, groups) + 1)})
    per_group = [meta.row_group(g).total_byte_size for g in range(groups)]
    total = sum(per_group) or 1
    return [
        Unit(which, index, fi, "rows", a, b, size=round(size * sum(per_group[a:b]) / total))
        for a, b in zip(bounds[:-1], bounds[1:])
    ]


def file_units(cfg: DataConfig, which: str, index: int, fi: int, path: Path, pieces: int) -> list[Unit]:
    """The units of one file, about `pieces` of them where its format allows cuts (else one)."""
    size = path.stat().st_size
    if pieces > 1 and path.name.endswith(".parquet"):
        return _row_units(which, index, fi, path, pieces)
    kind = _text_kind(path)
    if pieces > 1 and (kind == "jsonl" or (kind == "txt" and cfg.doc_delimiter is not None)):
        return _byte_units(which, index, fi, path, kind, pieces, cfg.doc_delimiter)
    return [Unit(which, index, fi, "whole", size=size)]


def source_size(src: ResolvedSource) -> int:
    return sum(p.stat().st_size for p in src.files)


def plan_units(cfg: DataConfig, sources, val_sources, tasks: int) -> list[Unit]:
    """Units in stream order (sources, then val_sources), files cut into pieces of about 1/tasks of the input."""
    every = [("sources", i, s) for i, s in enumerate(sources)] + [
        ("val_sources", i, s) for i, s in enumerate(val_sources or [])
    ]
    total = sum(source_size(s) for _, _, s in every)
    target = max(1, math.ceil(total / max(1, tasks)))
    units: list[Unit] = []
    for which, i, src in every:
        if src.config.hf_dataset is not None or src.config.max_documents:
            units.append(Unit(which, i, None, "whole", size=source_size(src)))
            continue
        for fi, path in enumerate(src.files):
            units += file_units(cfg, which, i, fi, path, math.ceil(path.stat().st_size / target))
    return units


def group_units(units: list[Unit], tasks: int) -> list[list[Unit]]:
    """Consecutive units into at most `tasks` groups of about equal bytes (none empty)."""
    total = sum(u.size for u in units) or 1
    groups: list[list[Unit]] = [[] for _ in range(max(1, tasks))]
    done = 0
    for u in units:
        k = min(len(groups) - 1, int((done + u.size / 2) * len(groups) / total))
        k = max(k, max((g for g in range(len(groups)) if groups[g]), default=0))  # never step back
        groups[k].append(u)
        done += u.size
    return [g for g in groups if g]


def unit_documents(cfg: DataConfig, sources: list[ResolvedSource], unit: Unit) -> Iterator[Document]:
    """The unit's documents, exactly as the whole-corpus stream yields them there."""
    source = sources[unit.source]
    if unit.file is None:
        for doc in iter_documents(cfg, [source]):
            yield Document(unit.source, doc.origin, doc.text)
        return
    path = source.files[unit.file]
    src = source.config
    if unit.kind == "whole":
        texts = file_documents(path, src, cfg.doc_chars, cfg.doc_delimiter)
    elif unit.kind == "rows":
        texts = _clean(iter_parquet_texts(path, src.text_field, range(unit.start, unit.end)))
    else:
        lines = iter_lines_range(path, unit.start, unit.end, unit.latin1_from)
        if _text_kind(path) == "jsonl":
            texts = _clean(jsonl_texts(path, src.text_field, lines))
        else:
            texts = cut_lines(map(normalize_line, lines), cfg.doc_chars, cfg.doc_delimiter)
    for text in texts:
        yield Document(unit.source, str(path), text)


def _clean(texts: Iterator[str]) -> Iterator[str]:
    for text in texts:
        text = normalize_text(text).strip()
        if text:
            yield text
