"""Resolve `data.sources` (and `data.val_sources`) into concrete inputs and stream their documents.

Resolution (paths, globs, folders, hashes) happens before any work so that a missing file, an
empty glob or a missing data root fails at once with the path that was tried. Reading is a
generator over streamed files (`readers`): compressed text is decompressed line by line, JSON
Lines row by row, Parquet batch by batch, so a corpus larger than memory can be prepared.
"""

from __future__ import annotations

import glob as globlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import pretrain
from pretrain.data.config import DataConfig, SourceConfig
from pretrain.data.normalize import cut_lines, normalize_line, normalize_text
from pretrain.data.readers import (
    COMPRESSED,
    iter_json_texts,
    iter_lines,
    iter_parquet_texts,
    row_text,
    strip_compression,
)
from pretrain.errors import DataError

PROJECT_ROOT = Path(pretrain.__file__).resolve().parents[1]
DATA_ROOT_ENV = "SCALELAB_DATA_ROOT"
_TEXT_KINDS = (".txt", ".jsonl", ".json", ".ndjson")
# Files a folder source picks up: text kinds, plain or compressed, and Parquet.
FOLDER_SUFFIXES = tuple(k + c for k in _TEXT_KINDS for c in ("", *COMPRESSED)) + (".parquet",)
_JSON_KINDS = (".jsonl", ".json", ".ndjson")

ORIGINS = {
    "tinyshakespeare": "TinyShakespeare is data/tinyshakespeare/input.txt in github.com/karpathy/char-rnn "
    "(also the Hugging Face dataset `tiny_shakespeare`); save it as corpus/tinyshakespeare.txt",
    "gutenberg": "the Gutenberg books are NLTK's `gutenberg` corpus: `python -m nltk.downloader gutenberg`, "
    "then copy nltk_data/corpora/gutenberg/*.txt to corpus/gutenberg/",
}


def origins_hint(text: str | None = None) -> str:
    """Where the default corpus's public files come from (all of them, or those `text` mentions)."""
    lines = [v for k, v in ORIGINS.items() if text is None or k in text.lower()]
    return "\n    - ".join(["public origins of the default corpus:", *lines]) if lines else ""


@dataclass(frozen=True)
class DataRoot:
    path: Path
    origin: str  # which setting it came from, for error messages


def data_root(cfg: DataConfig) -> DataRoot:
    """data.root, else $SCALELAB_DATA_ROOT, else ../shared/data beside the project."""
    if cfg.root:
        return DataRoot(Path(cfg.root).expanduser().resolve(), "data.root")
    if os.environ.get(DATA_ROOT_ENV):
        return DataRoot(Path(os.environ[DATA_ROOT_ENV]).expanduser().resolve(), f"${DATA_ROOT_ENV}")
    return DataRoot((PROJECT_ROOT.parent / "shared" / "data").resolve(), "default (../shared/data beside the project)")


def _require_root(cfg: DataConfig) -> Path:
    root = data_root(cfg)
    if not root.path.is_dir():
        raise DataError(
            f"data root {root.path} does not exist (from {root.origin}); set data.root=DIR or "
            f"${DATA_ROOT_ENV}, or use absolute source paths.\n  " + origins_hint()
        )
    return root.path


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


@dataclass
class ResolvedSource:
    """One configured source after resolution: the files it expands to, or an HF dataset."""

    config: SourceConfig
    files: list[Path] = field(default_factory=list)
    hf_target: str | None = None  # local path or hub name for hf_dataset sources
    fingerprint: dict[str, Any] = field(default_factory=dict)
    dataset: Any = field(default=None, repr=False)  # loaded HF dataset, reused by every pass

    def describe(self) -> dict[str, Any]:
        """The meta.json entry: what was read, with sizes and hashes."""
        if self.config.hf_dataset is not None:
            return {"hf_dataset": self.config.hf_dataset, "resolved": self.hf_target, **self.fingerprint}
        return {
            "path": self.config.path,
            "files": [
                {"path": str(p), "bytes": p.stat().st_size, "sha256": self.fingerprint[str(p)]} for p in self.files
            ],
        }


def _has_magic(path: str) -> bool:
    return globlib.has_magic(path)


def _folder_files(folder: Path) -> list[Path]:
    found = [
        p for p in folder.rglob("*") if p.is_file() and p.name.endswith(FOLDER_SUFFIXES) and not p.name.startswith(".")
    ]
    return sorted(found)


def _resolve_path_source(cfg: DataConfig, src: SourceConfig) -> list[Path]:
    raw = os.path.expanduser(src.path or "")
    base = None if os.path.isabs(raw) else _require_root(cfg)
    full = raw if base is None else str(base / raw)
    if _has_magic(raw):
        files = sorted(Path(p) for p in globlib.glob(full, recursive=True) if Path(p).is_file())
        if not files:
            raise DataError(f"source glob '{src.path}' matched no files (tried {full})" + _hint(raw))
        return [f.resolve() for f in files]
    path = Path(full)
    if path.is_dir():
        files = _folder_files(path)
        if not files:
            raise DataError(
                f"source folder {path} holds no {'/'.join(_TEXT_KINDS)} (optionally .gz/.xz/.zst) or .parquet files"
            )
        return [f.resolve() for f in files]
    if path.is_file():
        return [path.resolve()]
    raise DataError(f"source '{src.path}' not found (tried {path})" + _hint(raw))


def _hint(raw: str) -> str:
    hint = origins_hint(raw)
    return "\n  " + hint if hint else ""


def _local_hf_path(cfg: DataConfig, name: str) -> Path | None:
    """`hf_dataset` may name a local dataset: absolute, relative to cwd, or under the data root."""
    candidates = [Path(name).expanduser()]
    if not candidates[0].is_absolute():
        root = data_root(cfg).path
        candidates.append(root / name)
    for cand in candidates:
        if cand.exists():
            return cand.resolve()
    return None


def _tree_hashes(path: Path) -> dict[str, str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p.relative_to(path) if path.is_dir() else p.name): sha256_file(p) for p in files}


def resolve_sources(cfg: DataConfig, which: str = "sources") -> list[ResolvedSource]:
    """Expand every entry of `data.<which>` (sources or val_sources) and hash its content (sha256: ~1 GB/s)."""
    resolved = []
    for src in getattr(cfg, which) or []:
        if src.path is not None:
            files = _resolve_path_source(cfg, src)
            resolved.append(ResolvedSource(src, files=files, fingerprint={str(p): sha256_file(p) for p in files}))
            continue
        local = _local_hf_path(cfg, src.hf_dataset or "")
        if local is not None:
            fp = {
                "local": True,
                "sha256": hashlib.sha256(json.dumps(_tree_hashes(local), sort_keys=True).encode()).hexdigest(),
            }
            resolved.append(ResolvedSource(src, hf_target=str(local), fingerprint=fp))
        else:
            source = ResolvedSource(src, hf_target=src.hf_dataset, fingerprint={"local": False})
            if not src.streaming:
                # The downloaded dataset's fingerprint changes with its files; a streamed one is
                # identified by name/config/split only (rerun with --force to refresh it).
                source.fingerprint["dataset_fingerprint"] = getattr(_load_hf(source), "_fingerprint", None)
            resolved.append(source)
    return resolved


# ---------------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True)
class Document:
    source: int  # index in data.sources
    origin: str  # file path or dataset name, for messages
    text: str


def _row_text(row: Any, src: SourceConfig, where: str) -> str | None:
    return row_text(row, src.text_field, where)


def file_documents(path: Path, src: SourceConfig, doc_chars: int | None, delimiter: str | None = None) -> Iterator[str]:
    """Documents of one file: a row per document for JSON/Parquet, cut text for plain files."""
    base = strip_compression(path.name)
    if base.endswith(_JSON_KINDS) or path.name.endswith(".parquet"):
        texts = (
            iter_parquet_texts(path, src.text_field)
            if path.name.endswith(".parquet")
            else iter_json_texts(path, src.text_field)
        )
        for text in texts:
            text = normalize_text(text).strip()
            if text:
                yield text
        return
    yield from cut_lines(map(normalize_line, iter_lines(path)), doc_chars, delimiter)


_file_documents = file_documents  # the old private name (tests)


def _load_hf(source: ResolvedSource):
    """Load an HF dataset once (local save_to_disk folder, local data file/folder, or hub name)."""
    if source.dataset is None:
        source.dataset = _load_hf_uncached(source)
    return source.dataset


def _load_hf_uncached(source: ResolvedSource):
    src = source.config
    try:
        import datasets  # deferred: imports datasets
    except ImportError as exc:  # pragma: no cover - datasets is a dependency
        raise DataError(f"hf_dataset sources need the `datasets` package ({exc})") from None
    target = source.hf_target or ""
    try:
        if source.fingerprint.get("local"):
            path = Path(target)
            if path.is_dir() and ((path / "state.json").exists() or (path / "dataset_dict.json").exists()):
                ds = datasets.load_from_disk(str(path))
                if isinstance(ds, datasets.DatasetDict):
                    if src.split not in ds:
                        raise DataError(f"hf_dataset {target}: no split '{src.split}'; splits: {', '.join(ds)}")
                    ds = ds[src.split]
                return ds
            if path.is_file():
                name = path.name.removesuffix(".gz")
                builder = {
                    ".jsonl": "json",
                    ".json": "json",
                    ".ndjson": "json",
                    ".csv": "csv",
                    ".parquet": "parquet",
                    ".txt": "text",
                }
                kind = next((v for k, v in builder.items() if name.endswith(k)), None)
                if kind is None:
                    raise DataError(f"hf_dataset {target}: unsupported file type (use json/jsonl/csv/parquet/txt)")
                return datasets.load_dataset(kind, data_files=str(path), split="train", streaming=src.streaming)
        return datasets.load_dataset(target, src.hf_config, split=src.split, streaming=src.streaming)
    except DataError:
        raise
    except Exception as exc:  # datasets raises many types (offline, missing split, bad config)
        offline = os.environ.get("HF_DATASETS_OFFLINE") or os.environ.get("HF_HUB_OFFLINE")
        extra = " (offline mode is set: only cached or local datasets can be read)" if offline else ""
        raise DataError(f"could not load hf_dataset '{src.hf_dataset}'{extra}: {type(exc).__name__}: {exc}") from None


def _hf_documents(source: ResolvedSource) -> Iterator[str]:
    src = source.config
    ds = _load_hf(source)
    for i, row in enumerate(ds):
        value = _row_text(row, src, f"hf_dataset {src.hf_dataset} row {i}")
        if value is None:
            continue
        text = normalize_text(value).strip()
        if text:
            yield text


def iter_documents(cfg: DataConfig, sources: list[ResolvedSource]) -> Iterator[Document]:
    """All documents of `sources` in config order, streamed; `max_documents` caps each source."""
    for index, source in enumerate(sources):
        src = source.config
        if src.hf_dataset is not None:
            texts: Iterator[str] = _hf_documents(source)
            origin = src.hf_dataset
            texts = islice(texts, src.max_documents) if src.max_documents else texts
            for text in texts:
                yield Document(index, origin, text)
            continue

        def file_texts(source: ResolvedSource = source, src: SourceConfig = src) -> Iterator[tuple[str, str]]:
            for path in source.files:
                for text in file_documents(path, src, cfg.doc_chars, cfg.doc_delimiter):
                    yield str(path), text

        pairs = file_texts()
        for origin, text in islice(pairs, src.max_documents) if src.max_documents else pairs:
            yield Document(index, origin, text)
