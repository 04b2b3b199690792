"""`summary.json`: what a run ended with, typed and versioned.

The trainer writes it once, atomically, when a run ends (done, failed or preempted):

    RunSummary(status="done", name=..., steps=..., ...).write(run_dir)

Readers (the registry, sweeps, fitter, dashboard) use `read_summary` (a dict, as written) or
`RunSummary.read`. Files written before `schema_version` existed read as version 0: same keys.
Key names and order are part of the product (notebooks and other tools read them): a field is
added at the end of its group, never renamed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rundir.files import atomic_write_json
from rundir.layout import SUMMARY

SCHEMA_VERSION = 1
# Per-source keys of data-mixture runs (`tokens/<label>`, ...), written after `unique_tokens`.
SOURCE_PREFIXES = ("epochs/", "tokens/", "unique_tokens/", "weight/")


@dataclass
class RunSummary:
    status: str  # done | failed | preempted
    name: str | None = None
    steps: int | None = None
    total_steps: int | None = None
    tokens: int | None = None
    params: int | None = None
    non_embedding_params: int | None = None
    active_params: int | None = None
    active_non_embedding_params: int | None = None
    flops_per_token: float | None = None
    flops: float | None = None
    batch_tokens: int | None = None
    batch_size: int | None = None
    lr: float | None = None  # as configured (with optim.width_lr_ref: the reference width's lr)
    peak_lr: float | None = None
    final_loss: float | None = None
    final_val_loss: float | None = None
    final_val_bpb: float | None = None
    tokens_per_s: float | None = None  # training time only (eval_s excluded)
    mfu: float | None = None
    peak_flops: float | None = None
    peak_source: str | None = None
    world_size: int | None = None
    threads: int | None = None  # per rank
    deterministic: bool | None = None
    wall_s: float | None = None
    eval_s: float | None = None
    skipped_steps: int | None = None
    finished_at: str | None = None  # ISO 8601, UTC
    extras: dict = field(default_factory=dict)  # the config's extras (sweep, run, run_id, axes)
    epochs: float | None = None  # passes over the training split's unique tokens
    unique_tokens: int | None = None
    sources: dict[str, Any] = field(default_factory=dict)  # SOURCE_PREFIXES keys, flattened when written
    moe: dict | None = None  # MoE runs only: models.moe.accounting.moe_summary (written only when set)
    # MoE runs only (written only when set): training FLOPs of the experts the routers actually ran
    # (pretrain/callbacks/moe.py); `flops` stays the config count (models/accounting.py)
    flops_realised: float | None = None
    # Branches only (train.init_from), written only when set: {run: the parent's run directory,
    # step: the branch point}, and the tokens and FLOPs of the parent's prefix (steps 1..step), which
    # `tokens` and `flops` include but this run did not compute.
    init_from: dict | None = None
    shared_tokens: int | None = None
    shared_flops: float | None = None
    # {name, muon_tensors, muon_params, adamw_tensors, adamw_params, ...}: how optim.name split the
    # parameters (pretrain/optim/muon_build.py); written only when set (runs from before it have none: adamw)
    optimizer: dict | None = None
    # model.parametrization (sp | mup), written only when set (runs from before it have none: sp); under
    # mup also `mup`: {mup_base_width, mup_base_head_dim, mup_width_mult} (models.mup.base_shapes)
    parametrization: str | None = None
    mup: dict | None = None
    error: str | None = None  # written only when set
    schema_version: int = SCHEMA_VERSION
    other: dict[str, Any] = field(default_factory=dict)  # keys this version does not know, kept as they are

    # ------------------------------------------------------------------ dict form
    def to_dict(self) -> dict:
        """The JSON object as written: known keys in order, mixture keys after `unique_tokens`."""
        d = asdict(self)
        sources, other, error, version = d.pop("sources"), d.pop("other"), d.pop("error"), d.pop("schema_version")
        moe, optimizer, realised = d.pop("moe"), d.pop("optimizer"), d.pop("flops_realised")
        parametrization = {k: d.pop(k) for k in ("parametrization", "mup")}
        lineage = {k: d.pop(k) for k in ("init_from", "shared_tokens", "shared_flops")}
        d.update(sources)
        if moe is not None:
            d["moe"] = moe
        if realised is not None:
            d["flops_realised"] = realised
        if lineage["init_from"] is not None:
            d.update(lineage)
        if optimizer is not None:
            d["optimizer"] = optimizer
        d.update({k: v for k, v in parametrization.items() if v is not None})
        if error is not None:
            d["error"] = error
        d.update(other)
        d["schema_version"] = version
        return d

    @classmethod
    def from_dict(cls, d: dict) -> RunSummary:
        """Tolerant: missing keys are None, unknown keys are kept in `other`, no version means 0."""
        known = {f.name for f in fields(cls)} - {"sources", "other"}
        kw: dict[str, Any] = {
            "status": d.get("status"),
            "schema_version": d.get("schema_version", 0),
            "sources": {},
            "other": {},
        }
        for k, v in d.items():
            if k in known and k not in ("status", "schema_version"):
                kw[k] = v
            elif k.startswith(SOURCE_PREFIXES):
                kw["sources"][k] = v
            elif k not in ("status", "schema_version"):
                kw["other"][k] = v
        return cls(**kw)

    # ------------------------------------------------------------------ files
    def write(self, run_dir: str | Path) -> Path:
        path = Path(run_dir) / SUMMARY
        atomic_write_json(path, self.to_dict())
        return path

    @classmethod
    def read(cls, run_dir: str | Path) -> RunSummary | None:
        d = read_summary(run_dir)
        return None if d is None else cls.from_dict(d)


def write_summary(run_dir: str | Path, summary: dict) -> Path:
    """Write the summary a writer built as a dict (the trainer's) at the current schema version."""
    return RunSummary.from_dict({**summary, "schema_version": SCHEMA_VERSION}).write(run_dir)


def read_summary(run_dir: str | Path, strict: bool = False) -> dict | None:
    """`summary.json` of a run directory as written; None when there is none. An unreadable,
    torn or corrupt file is None too, or with `strict=True` an OSError, or a ValueError that says why."""
    try:
        d = json.loads((Path(run_dir) / SUMMARY).read_text())
        if not isinstance(d, dict):
            raise ValueError("not a JSON object")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        if strict:
            raise
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        if strict:
            raise ValueError(f"{SUMMARY} unreadable (half-written or corrupt: {exc})") from None
        return None
    return d
