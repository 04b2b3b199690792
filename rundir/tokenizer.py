"""The run's own tokenizer (`tokenizer.json` + `tokenizer_meta.json`), checked against its model.

A run directory is self-contained: evaluation and export read the tokenizer the run trained
with, and refuse one whose sizes or end-of-text id disagree with the model.
"""

from __future__ import annotations

import json
from pathlib import Path

from rundir.checkpoints import CheckpointError
from rundir.layout import TOKENIZER, TOKENIZER_META

EOT_TOKEN = "<|endoftext|>"


def load_tokenizer(run_dir: Path, model_vocab: int | None = None):
    """(HF `tokenizers.Tokenizer`, EOT id, metadata) of a run, checked against the model's vocabulary."""
    from tokenizers import Tokenizer  # deferred: imports tokenizers

    tok_path = Path(run_dir) / TOKENIZER
    if not tok_path.exists():
        raise CheckpointError(f"{run_dir}: {TOKENIZER} missing; the run directory is not self-contained")
    tok = Tokenizer.from_file(str(tok_path))
    meta_path = Path(run_dir) / TOKENIZER_META
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    eot = tok.token_to_id(EOT_TOKEN)
    if eot is None:
        raise CheckpointError(f"{tok_path}: tokenizer has no {EOT_TOKEN} token")
    check_tokenizer(tok.get_vocab_size(), eot, meta, model_vocab, str(tok_path))
    return tok, eot, meta


def check_tokenizer(tok_vocab: int, eot: int, meta: dict, model_vocab: int | None, where: str) -> None:
    """Refuse a tokenizer that does not belong to the model (wrong sizes or EOT id)."""
    if meta.get("vocab_size") is not None and meta["vocab_size"] != tok_vocab:
        raise CheckpointError(
            f"tokenizer mismatch: {where} has {tok_vocab} tokens but {TOKENIZER_META} says {meta['vocab_size']}"
        )
    if meta.get("eot_id") is not None and meta["eot_id"] != eot:
        raise CheckpointError(
            f"tokenizer mismatch: {where} maps {EOT_TOKEN} to {eot}, {TOKENIZER_META} to {meta['eot_id']}"
        )
    if model_vocab is not None and tok_vocab > model_vocab:
        raise CheckpointError(
            f"tokenizer mismatch: {where} has {tok_vocab} tokens but the model's vocabulary is {model_vocab}"
        )
