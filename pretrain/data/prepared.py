"""A prepared data folder, read back: meta.json, tokenizer.json and the token shards.

This is the contract between `scalelab data prepare` and its consumers (trainer, evals,
export): they only need a folder path.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pretrain.data.shards import open_shards
from pretrain.data.tokens import TokenStream
from pretrain.errors import DataError

FORMAT_VERSION = 1
META_FILE = "meta.json"
TOKENIZER_FILE = "tokenizer.json"
_REQUIRED = ("format", "fingerprint", "vocab_size", "eot_id", "dtype", "splits", "tokenizer")


@dataclass
class PreparedData:
    out_dir: Path
    meta: dict[str, Any]
    reused: bool = False  # set by prepare(): True when the cache was valid
    reason: str = ""  # why it was built (or "up to date")
    _streams: dict[str, TokenStream] = field(default_factory=dict, repr=False)

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])

    @property
    def eot_id(self) -> int:
        """End-of-text id: precedes every document in the shards; BOS for empty contexts."""
        return int(self.meta["eot_id"])

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.meta["dtype"])

    @property
    def fingerprint(self) -> str:
        return self.meta["fingerprint"]

    @property
    def tokenizer_path(self) -> Path:
        return self.out_dir / self.meta["tokenizer"]["file"]

    def _split(self, split: str) -> dict[str, Any]:
        if split not in self.meta["splits"]:
            raise DataError(f"no split '{split}' in {self.out_dir}; splits: {', '.join(self.meta['splits'])}")
        return self.meta["splits"][split]

    def split_shards(self, split: str) -> list[np.ndarray]:
        """One read-only memmap per shard (lazy: nothing is read until indexed)."""
        return open_shards(self.out_dir, self._split(split)["shards"], self.dtype)

    def token_stream(self, split: str) -> TokenStream:
        """The split's shards read as one stream (len, slices across shards); nothing is loaded."""
        if split not in self._streams:
            self._streams[split] = TokenStream(self.split_shards(split))
        return self._streams[split]

    def split_tokens(self, split: str) -> np.ndarray | TokenStream:
        """The split as one 1-D token sequence: its memmap when it is one shard, else a `TokenStream`
        over the shards (never concatenated in memory; `np.asarray` materialises it explicitly)."""
        shards = self.split_shards(split)
        return shards[0] if len(shards) == 1 else self.token_stream(split)

    def num_tokens(self, split: str) -> int:
        return int(self._split(split)["tokens"])

    def unique_tokens(self, split: str) -> int:
        """Tokens of the split counting each distinct document once (= num_tokens without duplicates).

        Folders prepared before this count was recorded fall back to the token count."""
        info = self._split(split)
        return int(info.get("unique_tokens", info["tokens"]))

    def bytes_per_token(self, split: str) -> float:
        """UTF-8 bytes of the split's text per token (separators included): bpb = nats/token / ln2 / this."""
        info = self._split(split)
        return info["bytes"] / info["tokens"]

    def load_tokenizer(self):
        from tokenizers import Tokenizer  # deferred: imports tokenizers

        return Tokenizer.from_file(str(self.tokenizer_path))


def load_prepared(out_dir: str | Path) -> PreparedData:
    """Open a prepared folder, checking it is complete (every shard size and the tokenizer hash)."""
    out_dir = Path(out_dir).expanduser().resolve()
    meta_path = out_dir / META_FILE
    if not meta_path.is_file():
        raise DataError(f"no prepared data at {out_dir} ({META_FILE} missing); run `scalelab data prepare CONFIG`")
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{meta_path}: corrupt ({exc}); rerun `scalelab data prepare --force`") from None
    missing = [k for k in _REQUIRED if k not in meta]
    if missing:
        raise DataError(f"{meta_path}: missing {', '.join(missing)}; rerun `scalelab data prepare --force`")
    if meta["format"] != FORMAT_VERSION:
        raise DataError(f"{meta_path}: format {meta['format']}, this version reads {FORMAT_VERSION}; rerun prepare")
    data = PreparedData(out_dir, meta)
    tok = data.tokenizer_path
    if not tok.is_file() or hashlib.sha256(tok.read_bytes()).hexdigest() != meta["tokenizer"]["sha256"]:
        raise DataError(
            f"{tok}: missing or changed since prepare (sha256 mismatch); rerun `scalelab data prepare --force`"
        )
    for split in meta["splits"]:
        data.split_shards(split)  # size checks only; memmaps are cheap
    return data
