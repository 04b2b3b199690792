"""Streaming readers: compressed files line by line, JSON Lines rows, Parquet batches.

Nothing here reads a whole file: compressed inputs are decompressed incrementally (gzip, lzma,
and zstandard when the `zstandard` package is installed) and yielded a line at a time, Parquet
files a record batch at a time, so a corpus of any size is read in constant memory.
"""

from __future__ import annotations

import gzip
import io
import json
import lzma
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from pretrain.errors import DataError

COMPRESSED = (".gz", ".xz", ".zst")
PARQUET_BATCH_ROWS = 1024


def strip_compression(name: str) -> str:
    for suffix in COMPRESSED:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


@contextmanager
def open_binary(path: Path) -> Iterator[BinaryIO]:
    """A binary stream of the file's (decompressed) bytes, chosen by suffix."""
    name = path.name
    if name.endswith(".gz"):
        fh: Any = gzip.open(path, "rb")
    elif name.endswith(".xz"):
        fh = lzma.open(path, "rb")
    elif name.endswith(".zst"):
        try:
            import zstandard  # deferred: imports zstandard
        except ImportError:
            raise DataError(
                f"{path}: reading .zst files needs the `zstandard` package (pip install zstandard)"
            ) from None
        raw = open(path, "rb")
        fh = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, closefd=True), buffer_size=1 << 20)
    else:
        fh = open(path, "rb", buffering=1 << 20)
    try:
        yield fh
    finally:
        fh.close()


def _corrupt(path: Path, exc: BaseException) -> DataError:
    kind = {".gz": "gzip", ".xz": "xz", ".zst": "zstandard"}.get(path.suffix, "compressed")
    return DataError(f"{path}: not a valid {kind} file or truncated ({type(exc).__name__}: {exc})")


def _decode_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError, EOFError, zlib.error, lzma.LZMAError]
    try:
        import zstandard  # deferred: imports zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


def iter_lines(path: Path) -> Iterator[str]:
    """The file's lines as text, newline kept; decompressed on the fly.

    Decoding: UTF-8 (a leading byte-order mark dropped) until the first line that is not valid
    UTF-8; from there on the file is read as Latin-1, which decodes any byte (NLTK's
    shakespeare-caesar.txt is Latin-1). Equal to decoding the whole file as UTF-8, else Latin-1,
    whenever the earlier lines are ASCII.
    """
    errors = _decode_errors()
    utf8, first = True, True
    try:
        with open_binary(path) as fh:
            for raw in fh:
                if first:
                    first = False
                    if raw.startswith(b"\xef\xbb\xbf"):
                        raw = raw[3:]
                if utf8:
                    try:
                        yield raw.decode("utf-8")
                        continue
                    except UnicodeDecodeError:
                        utf8 = False
                yield raw.decode("latin-1")
    except DataError:
        raise
    except errors as exc:
        raise _corrupt(path, exc) from None


def iter_lines_range(path: Path, start: int, end: int | None, latin1_from: int | None = None) -> Iterator[str]:
    """The lines of an uncompressed file that start in [start, end), decoded as `iter_lines` decodes them
    from the file's start: `latin1_from` is where its first line that is not UTF-8 starts (None: none)."""
    try:
        with open(path, "rb", buffering=1 << 20) as fh:
            fh.seek(start)
            pos = start
            for raw in fh:
                if end is not None and pos >= end:
                    return
                latin1 = latin1_from is not None and pos >= latin1_from
                if pos == 0 and raw.startswith(b"\xef\xbb\xbf"):
                    pos, raw = len(raw), raw[3:]
                else:
                    pos += len(raw)
                if not latin1:
                    try:
                        yield raw.decode("utf-8")
                        continue
                    except UnicodeDecodeError:
                        pass
                yield raw.decode("latin-1")
    except OSError as exc:
        raise _corrupt(path, exc) from None


def row_text(row: Any, text_field: str, where: str) -> str | None:
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object per row, got {type(row).__name__}")
    if text_field not in row:
        keys = ", ".join(sorted(map(str, row))) or "(none)"
        raise DataError(f"{where}: row has no field '{text_field}' (data.sources[].text_field); fields: {keys}")
    value = row[text_field]
    if value is None:
        return None
    if not isinstance(value, str):
        raise DataError(f"{where}: field '{text_field}' is {type(value).__name__}, expected text")
    return value


def iter_json_texts(path: Path, text_field: str) -> Iterator[str]:
    """Texts of a JSON Lines file (streamed) or of a JSON array file (.json: read whole, small files only)."""
    base = strip_compression(path.name)
    if base.endswith(".json"):
        lines = iter_lines(path)
        head = ""
        for line in lines:
            head += line
            if head.strip():
                break
        if head.lstrip().startswith("["):
            text = head + "".join(lines)
            try:
                rows = json.loads(text)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}: invalid JSON ({exc})") from None
            for i, row in enumerate(rows):
                value = row_text(row, text_field, f"{path} item {i}")
                if value is not None:
                    yield value
            return
        yield from jsonl_texts(path, text_field, _chain(head, lines))
        return
    yield from jsonl_texts(path, text_field, iter_lines(path))


def _chain(head: str, rest: Iterator[str]) -> Iterator[str]:
    yield from io.StringIO(head)
    yield from rest


def jsonl_texts(path: Path, text_field: str, lines: Iterator[str]) -> Iterator[str]:
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{lineno}: invalid JSON line ({exc.msg})") from None
        value = row_text(row, text_field, f"{path}:{lineno}")
        if value is not None:
            yield value


def iter_parquet_texts(path: Path, text_field: str, row_groups: range | None = None) -> Iterator[str]:
    """The text column of a Parquet file (or of some of its row groups), one record batch at a time."""
    try:
        import pyarrow.parquet as pq  # deferred: imports pyarrow
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        raise DataError(f"{path}: reading Parquet needs the `pyarrow` package") from None
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid and friends
        raise DataError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
    names = pf.schema_arrow.names
    if text_field not in names:
        raise DataError(
            f"{path}: no column '{text_field}' (data.sources[].text_field); columns: {', '.join(names) or '(none)'}"
        )
    import pyarrow as pa  # deferred: imports pyarrow

    kind = pf.schema_arrow.field(text_field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise DataError(f"{path}: column '{text_field}' is {kind}, expected text (string)")
    groups = None if row_groups is None else list(row_groups)
    for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=[text_field], row_groups=groups):
        for value in batch.column(0).to_pylist():
            if value is not None:
                yield value
