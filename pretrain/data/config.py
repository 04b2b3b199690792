"""Typed data configuration: sources, document boundaries, tokenizer, split, mixtures, output."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from base.roles import BOOKKEEPING, PATH, RESUMABLE
from base.strict import StrictModel

DEFAULT_DELIMITER = "<|endoftext|>"
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class SourceConfig(StrictModel):
    """One input: a local file/folder/glob (txt, jsonl, parquet; .gz/.xz/.zst) or a Hugging Face dataset."""

    path: str | None = Field(None, description="file, folder or glob; relative paths are under data.root")
    hf_dataset: str | None = Field(None, description="Hugging Face dataset name (through `datasets`)")
    hf_config: str | None = Field(None, description="dataset configuration name")
    split: str = Field("train", description="dataset split to read")
    text_field: str = Field("text", description="field (jsonl, HF rows) or column (parquet) holding the text")
    streaming: bool = Field(False, description="stream the HF dataset instead of downloading it")
    max_documents: int | None = Field(None, gt=0, description="stop after this many documents")

    @model_validator(mode="after")
    def _one_kind(self) -> SourceConfig:
        if (self.path is None) == (self.hf_dataset is None):
            raise ValueError("each data.sources entry needs exactly one of `path` or `hf_dataset`")
        return self


class TokenizerConfig(StrictModel):
    kind: Literal["bpe", "hf", "gpt2"] = Field(
        "bpe",
        description="bpe: train a byte-level BPE on the corpus; hf: load from `path`; gpt2: GPT-2 BPE shipped offline",
    )
    vocab_size: int = Field(4096, ge=256, le=1_000_000, description="vocabulary size of the trained BPE (kind=bpe)")
    path: str | None = Field(None, description="tokenizer.json file or HF tokenizer directory (kind=hf)")
    min_frequency: int = Field(2, ge=1, description="minimum pair frequency when training the BPE")
    sample_chars: int = Field(
        25_000_000,
        gt=0,
        description="kind=bpe: train the BPE on a seeded sample of about this many characters of the train "
        "split (the whole documents with the smallest seeded hashes; the whole split when it is "
        "smaller); bounds time and memory on large corpora (the old name train_max_chars is accepted)",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_name(cls, values: Any) -> Any:
        # `train_max_chars` (first N characters) was replaced by the seeded sample; old configs
        # (and the config.yaml of existing runs) still validate.
        if isinstance(values, dict) and "train_max_chars" in values:
            values = dict(values)
            old = values.pop("train_max_chars")
            values.setdefault("sample_chars", old)
        return values

    @model_validator(mode="after")
    def _path_for_hf(self) -> TokenizerConfig:
        if self.kind == "hf" and not self.path:
            raise ValueError("data.tokenizer.path is required when data.tokenizer.kind is 'hf'")
        return self


class MixtureComponent(StrictModel):
    weight: float = Field(gt=0, description="relative sampling weight (normalised over the mixture)")
    data: str = Field(description="a data preset name in configs/data/, a data config YAML, or a prepared data folder")


def _sources(value: Any) -> Any:
    if isinstance(value, list):
        return [{"path": s} if isinstance(s, str) else s for s in value]
    return value


class DataConfig(StrictModel):
    name: str = Field("default", description="name of the prepared data set (output folder name)")
    root: str | None = Field(
        None,
        description="base folder for relative source paths (default: "
        "$SCALELAB_DATA_ROOT, else ../shared/data next to the project)",
    )
    sources: list[SourceConfig] | None = Field(
        None, description="inputs; strings are shorthand for {path: ...}; required unless data.mixture is set"
    )
    val_sources: list[SourceConfig] | None = Field(
        None,
        description="a given validation set (same shape as sources): it is the val "
        "split, and every document of `sources` is train (val_fraction "
        "unused); null: hold out val_fraction of the documents by a seeded hash",
    )
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    val_fraction: float = Field(
        0.05, gt=0, lt=0.5, description="fraction of documents held out for validation (when val_sources is not given)"
    )
    doc_delimiter: str | None = Field(
        DEFAULT_DELIMITER,
        description="in plain-text files a line equal to this (surrounding whitespace "
        "ignored) ends a document and is dropped; null: no delimiter",
    )
    doc_chars: int | None = Field(
        20_000,
        gt=0,
        description="plain text between delimiters is cut into documents of about this many characters at "
        "paragraph breaks; null: never cut (a document runs to the next delimiter or the end of the file)",
    )
    seed: int = Field(0, description="seed of the document-level split and of the tokenizer's training sample")
    out_dir: Annotated[str | None, PATH] = Field(
        None, description="output folder (default data/<name>, relative to the working directory)"
    )
    shard_tokens: Annotated[int, RESUMABLE, BOOKKEEPING] = Field(
        1_000_000_000, gt=0, description="start a new .bin shard past this many tokens (cut at document boundaries)"
    )
    workers: Annotated[int | None, RESUMABLE, BOOKKEEPING] = Field(
        None,
        ge=1,
        description="tokenizer processes when encoding (default: the CPU cores available; "
        "1: in this process); small corpora are always encoded in-process",
    )
    tasks: Annotated[int, RESUMABLE] = Field(
        1,
        ge=1,
        description="cut the preparation into this many tasks (by file, and within a file by JSONL/plain-text "
        "byte ranges or Parquet row groups) run by `scalelab data prepare --executor local|slurm|ray`; the tokens "
        "are the same for any number",
    )
    mixture: dict[str, MixtureComponent] | None = Field(
        None,
        description="train on a weighted mixture of prepared data sets instead of "
        "`sources`: {label: weight} (label = a data preset or prepared folder) "
        "or {label: {weight, data}}; all components must share one tokenizer",
    )
    mixture_period: int = Field(
        1000,
        ge=1,
        description="mixture: samples per fixed interleaving pattern; each "
        "component gets round(weight * period) of them (at least 1)",
    )

    @field_validator("sources", "val_sources", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return _sources(value)

    @field_validator("mixture", mode="before")
    @classmethod
    def _mixture_shorthand(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out = {}
        for label, spec in value.items():
            label = str(label)
            if isinstance(spec, (int, float)) and not isinstance(spec, bool):
                spec = {"weight": spec, "data": label}
            out[label] = spec
        return out

    @model_validator(mode="after")
    def _inputs(self) -> DataConfig:
        if self.mixture is not None:
            if self.sources or self.val_sources:
                raise ValueError("data.mixture replaces data.sources/val_sources: give one or the other")
            if not self.mixture:
                raise ValueError("data.mixture must name at least one prepared data set")
            bad = [k for k in self.mixture if not _LABEL.match(k)]
            if bad:
                raise ValueError(
                    "data.mixture labels must be plain names (letters, "
                    f"digits, _ . -), got {', '.join(map(repr, bad))}; "
                    "give a path as {label: {weight: W, data: PATH}}"
                )
            return self
        if not self.sources:
            raise ValueError("data.sources must list at least one input (or set data.mixture)")
        if self.val_sources is not None and not self.val_sources:
            raise ValueError("data.val_sources must list at least one input (or be null for a hashed split)")
        return self
