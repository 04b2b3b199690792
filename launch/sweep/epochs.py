"""How many times each planned run passes over its unique training tokens, before anything is queued.

A run of D tokens on U unique training tokens repeats its data D / U times; the trainer warns at
start (train.max_epochs_warn), hours into a GPU queue. `sweep plan` shows the epochs of every run
and refuses runs over their limit unless --allow-repeats (repeating data on purpose: the
data-constrained law). U per data set (one estimate per distinct data config):

- exact: the prepared data set's meta.json (`splits.train.unique_tokens`) when it was prepared
  from this config;
- estimated: the text bytes of the sources (plain text and JSON lines by their file sizes above
  SMALL_BYTES, counted exactly below it; compressed and Parquet files read through, or at
  COMPRESSED_RATIO x their size above it) x (1 - val_fraction), over the tokenizer's bytes per
  token measured on a held-out sample (kind bpe: a BPE of the configured vocabulary trained on
  SAMPLE_CHARS of the sources, measured on the next SAMPLE_CHARS; gpt2/hf: the tokenizer itself);
- unknown: a source streamed from the Hugging Face Hub (not sized offline).
A mixture's runs count each component's share of the tokens against that component.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

from pretrain.data.mixture import component_target
from pretrain.data.sources import ResolvedSource, _resolve_path_source, data_root, iter_documents
from pretrain.errors import DataError

SAMPLE_CHARS = 2_000_000
SMALL_BYTES = 512 * 2**20  # below: stream every document (seconds); above: file sizes
COMPRESSED_RATIO = 4.0  # text bytes per compressed byte, when a large compressed corpus is not read through
PLAIN = (".txt", ".md", ".jsonl", ".json")


@dataclass(frozen=True)
class UniqueTokens:
    tokens: float | None
    basis: str  # exact | estimated | unknown, with how


def _prepared(dcfg) -> UniqueTokens | None:
    from pretrain.data.prepare import output_dir  # deferred: imports tokenizers

    meta_path = Path(output_dir(dcfg)) / "meta.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return None
    mine = {k: v for k, v in dcfg.model_dump(mode="json").items() if k not in ("out_dir", "workers", "shard_tokens")}
    theirs = {k: v for k, v in (meta.get("config") or {}).items() if k not in ("out_dir", "workers", "shard_tokens")}
    unique = ((meta.get("splits") or {}).get("train") or {}).get("unique_tokens")
    if mine != theirs or unique is None:
        return None
    return UniqueTokens(float(unique), f"exact (prepared: {meta_path})")


def _text_bytes(dcfg, sources: list) -> tuple[float, str]:
    """Text bytes of the resolved `sources` (see the module docstring) and how they were counted."""

    files = [p for s in sources for p in s.files]
    size = sum(p.stat().st_size for p in files)
    if size <= SMALL_BYTES and all(_plain_text(p) for p in files) and not any(s.config.max_documents for s in sources):
        n = sum(_stream_bytes(p) for p in files)  # the bytes themselves: ~10x faster than splitting documents
        return float(n), f"{n / 1e6:.3g} MB of text read"
    if size <= SMALL_BYTES:
        n = sum(len(d.text.encode("utf-8")) for d in iter_documents(dcfg, sources))
        return float(n), f"{n / 1e6:.3g} MB of text read"
    plain = sum(p.stat().st_size for p in files if p.suffix in PLAIN)
    other = size - plain
    note = f"{size / 1e9:.3g} GB of files" + (
        f" ({other / 1e9:.3g} GB compressed/columnar x {COMPRESSED_RATIO:g})" if other else ""
    )
    return plain + COMPRESSED_RATIO * other, note


def _plain_text(p: Path) -> bool:
    name = p.name.lower()
    return name.endswith((".txt", ".md", ".txt.gz", ".md.gz"))


def _stream_bytes(p: Path, chunk: int = 16 * 2**20) -> int:

    n = 0
    with gzip.open(p, "rb") if p.name.lower().endswith(".gz") else open(p, "rb") as f:
        while block := f.read(chunk):
            n += len(block)
    return n


def _sample(dcfg, sources: list, chars: int) -> tuple[str, str]:
    """Two consecutive samples of about `chars` characters of the sources (fit, measure)."""

    parts: list[list[str]] = [[], []]
    seen = [0, 0]
    i = 0
    for doc in iter_documents(dcfg, sources):
        parts[i].append(doc.text)
        seen[i] += len(doc.text)
        if seen[i] >= chars:
            if i == 1:
                break
            i = 1
    if not parts[1]:  # a small corpus: measure on what was fitted
        parts[1] = parts[0]
    return "\n".join(parts[0]), "\n".join(parts[1])


def bytes_per_token(dcfg, sources: list) -> tuple[float, str]:
    from pretrain.data.tokenizer import build_tokenizer  # deferred: imports tokenizers

    fit, held = _sample(dcfg, sources, SAMPLE_CHARS)
    tok_cfg = dcfg.tokenizer
    if tok_cfg.kind == "bpe":
        tok, _ = build_tokenizer(tok_cfg, None, [fit], log=lambda m: None)
        how = f"a {tok_cfg.vocab_size}-token BPE fitted on {len(fit) / 1e6:.2g}M characters of the sources"
    else:
        tok, _ = build_tokenizer(tok_cfg, data_root(dcfg).path, None, log=lambda m: None)
        how = f"the {tok_cfg.kind} tokenizer"
    n = len(tok.encode(held).ids)
    return len(held.encode("utf-8")) / max(1, n), how


def unique_tokens(dcfg) -> UniqueTokens:
    """U of one data config (not a mixture): exact, estimated or unknown (module docstring)."""

    found = _prepared(dcfg)
    if found:
        return found
    remote = [s.hf_dataset for s in (dcfg.sources or []) if s.path is None]
    if remote:
        return UniqueTokens(None, f"unknown (streamed from {', '.join(remote)}: not sized offline; prepare it first)")
    try:
        sources = [ResolvedSource(s, files=_resolve_path_source(dcfg, s)) for s in dcfg.sources or []]
    except DataError as exc:
        return UniqueTokens(None, f"unknown ({str(exc).splitlines()[0]})")
    if not any(s.files for s in sources):
        return UniqueTokens(None, "unknown (no source files)")
    text, counted = _text_bytes(dcfg, sources)
    bpt, how = bytes_per_token(dcfg, sources)
    train = 1.0 if dcfg.val_sources else 1.0 - dcfg.val_fraction
    tokens = text * train / bpt
    return UniqueTokens(tokens, f"estimated ({counted}, {bpt:.3g} bytes/token by {how}, train share {train:g})")


def _component(dcfg_or_path, cache: dict) -> UniqueTokens:
    if isinstance(dcfg_or_path, Path):  # a prepared folder named by a mixture
        try:
            meta = json.loads((dcfg_or_path / "meta.json").read_text())
            return UniqueTokens(float(meta["splits"]["train"]["unique_tokens"]), f"exact (prepared: {dcfg_or_path})")
        except (OSError, ValueError, KeyError):
            return UniqueTokens(None, f"unknown ({dcfg_or_path}/meta.json unreadable)")
    key = json.dumps(dcfg_or_path.model_dump(mode="json"), sort_keys=True)
    if key not in cache:
        cache[key] = unique_tokens(dcfg_or_path)
    return cache[key]


_CACHE: dict = {}  # one estimate per data config per process (sweep plan and its pre-flight share it)


def run_epochs(run, cache: dict | None = None) -> tuple[float | None, str]:
    """(epochs of the run's training tokens over its unique tokens, basis); None when unknown. A
    mixture: the most repeated component (its share of the tokens over its unique tokens)."""

    cache = _CACHE if cache is None else cache
    data = run.cfg.data
    if data.mixture is None:
        parts = [(1.0, data)]
    else:
        try:
            parts = [(c.weight, component_target(data, label, c.data)) for label, c in data.mixture.items()]
        except DataError as exc:
            return None, f"unknown ({str(exc).splitlines()[0]})"
    total = sum(w for w, _ in parts)
    worst, bases = 0.0, set()
    for w, target in parts:
        u = _component(target, cache)
        if u.tokens is None:
            return None, u.basis
        bases.add(u.basis)
        worst = max(worst, run.tokens * w / total / u.tokens)
    return worst, "; ".join(sorted(bases))
