"""The cache key of a prepared data set, and a readable reason when it changes.

The key covers everything that changes the tokens: the content hash of every input file, the
settings that shape documents and the split, and the tokenizer (settings for a trained BPE,
file hashes for a loaded one). It leaves out where things live (data root, output folder),
so copying the corpus elsewhere does not force a rebuild.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pretrain.data.config import DataConfig
from pretrain.data.prepared import FORMAT_VERSION
from pretrain.data.sources import ResolvedSource


def _display_name(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _describe(sources: list[ResolvedSource], root: Path) -> list[dict[str, Any]]:
    srcs = []
    for s in sources:
        spec = s.config.model_dump(mode="json", exclude={"path"})
        if s.config.hf_dataset is not None:
            srcs.append({"spec": spec, "content": s.fingerprint})
        else:
            srcs.append({"spec": spec, "files": {_display_name(p, root): s.fingerprint[str(p)] for p in s.files}})
    return srcs


def fingerprint_inputs(
    cfg: DataConfig,
    sources: list[ResolvedSource],
    root: Path,
    tokenizer: dict[str, Any],
    val_sources: list[ResolvedSource] | None = None,
) -> dict[str, Any]:
    settings = {
        "val_fraction": cfg.val_fraction,
        "doc_chars": cfg.doc_chars,
        "doc_delimiter": cfg.doc_delimiter,
        "seed": cfg.seed,
        "shard_tokens": cfg.shard_tokens,
    }
    out = {"format": FORMAT_VERSION, "settings": settings, "sources": _describe(sources, root), "tokenizer": tokenizer}
    if val_sources is not None:
        out["val_sources"] = _describe(val_sources, root)
        del settings["val_fraction"]  # unused with a given validation set
    return out


def fingerprint(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def _changed_keys(old: dict, new: dict) -> list[str]:
    return [f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]


def explain_change(old: dict[str, Any] | None, new: dict[str, Any]) -> str:
    """A one-line reason for a rebuild, naming the changed files or settings."""
    if not old:
        return "the existing folder has no fingerprint inputs"
    reasons = []
    if old.get("format") != new["format"]:
        reasons.append(f"data format {old.get('format')} -> {new['format']}")
    if old.get("settings") != new["settings"]:
        reasons.append("settings changed: " + ", ".join(_changed_keys(old.get("settings", {}), new["settings"])))
    if old.get("tokenizer") != new["tokenizer"]:
        ot, nt = old.get("tokenizer", {}), new["tokenizer"]
        keys = [c for c in _changed_keys(ot, nt) if not c.startswith("files")] or ["tokenizer files changed"]
        reasons.append("tokenizer changed: " + ", ".join(keys))
    if old.get("sources") != new["sources"] or old.get("val_sources") != new.get("val_sources"):
        every = lambda d: [*d.get("sources", []), *(d.get("val_sources") or [])]  # noqa: E731
        old_files = {n: h for s in every(old) for n, h in s.get("files", {}).items()}
        new_files = {n: h for s in every(new) for n, h in s.get("files", {}).items()}
        changed = sorted(n for n in new_files if n in old_files and old_files[n] != new_files[n])
        added = sorted(set(new_files) - set(old_files))
        removed = sorted(set(old_files) - set(new_files))
        parts = [
            f"{label}: {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"
            for label, names in (("changed", changed), ("added", added), ("removed", removed))
            if names
        ]
        reasons.append("inputs " + ("; ".join(parts) if parts else "changed (source settings or datasets)"))
    return "; ".join(reasons) or "fingerprint changed"
