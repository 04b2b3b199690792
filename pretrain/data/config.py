"""Typed data configuration: sources, tokenizer, split and output location."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from models.config import StrictModel


class SourceConfig(StrictModel):
    """One input: a local file/folder/glob (txt, jsonl, jsonl.gz) or a Hugging Face dataset."""

    path: str | None = Field(None, description="file, folder or glob; relative paths are under data.root")
    hf_dataset: str | None = Field(None, description="Hugging Face dataset name (through `datasets`)")
    hf_config: str | None = Field(None, description="dataset configuration name")
    split: str = Field("train", description="dataset split to read")
    text_field: str = Field("text", description="field holding the text in jsonl / HF rows")
    streaming: bool = Field(False, description="stream the HF dataset instead of downloading it")
    max_documents: int | None = Field(None, gt=0, description="stop after this many documents")

    @model_validator(mode="after")
    def _one_kind(self) -> "SourceConfig":
        if (self.path is None) == (self.hf_dataset is None):
            raise ValueError("each data.sources entry needs exactly one of `path` or `hf_dataset`")
        return self


class TokenizerConfig(StrictModel):
    kind: Literal["bpe", "hf", "gpt2"] = Field("bpe", description="bpe: train a byte-level BPE on the corpus; hf: load from `path`; gpt2: GPT-2 BPE shipped offline")
    vocab_size: int = Field(4096, ge=256, le=1_000_000, description="vocabulary size of the trained BPE (kind=bpe)")
    path: str | None = Field(None, description="tokenizer.json file or HF tokenizer directory (kind=hf)")
    min_frequency: int = Field(2, ge=1, description="minimum pair frequency when training the BPE")
    train_max_chars: int = Field(500_000_000, gt=0, description="train the BPE on at most this many characters of the train split (its first documents); bounds time and memory on large corpora")

    @model_validator(mode="after")
    def _path_for_hf(self) -> "TokenizerConfig":
        if self.kind == "hf" and not self.path:
            raise ValueError("data.tokenizer.path is required when data.tokenizer.kind is 'hf'")
        return self


class DataConfig(StrictModel):
    name: str = Field("default", description="name of the prepared data set (output folder name)")
    root: str | None = Field(None, description="base folder for relative source paths (default: $SCALELAB_DATA_ROOT, else ../shared/data next to the project)")
    sources: list[SourceConfig] = Field(description="inputs; strings are shorthand for {path: ...}")
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    val_fraction: float = Field(0.05, gt=0, lt=0.5, description="fraction of documents held out for validation")
    doc_chars: int = Field(20_000, gt=0, description="plain-text files are cut into documents of about this many characters at paragraph breaks")
    seed: int = Field(0, description="seed of the document-level split")
    out_dir: str | None = Field(None, description="output folder (default data/<name>, relative to the working directory)")
    shard_tokens: int = Field(1_000_000_000, gt=0, description="start a new .bin shard past this many tokens (cut at document boundaries)")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, values):
        if isinstance(values, dict) and isinstance(values.get("sources"), list):
            values = dict(values)
            values["sources"] = [{"path": s} if isinstance(s, str) else s for s in values["sources"]]
        return values

    @model_validator(mode="after")
    def _nonempty(self) -> "DataConfig":
        if not self.sources:
            raise ValueError("data.sources must list at least one input")
        return self
