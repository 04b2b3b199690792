"""The plan as a record: what `scalelab plan` prints with --json and writes with --out, and what the
dashboard, the accuracy chain and `--emit-config` read.

A typed, versioned record (scaling.core.typed_record, RunSummary's pattern). `make_plan` builds a
dict and returns `PlanRecord(d)`; the sections that extend it (cost, memory, inference, accuracy, ...)
are set by key as before. A key this version does not name is kept in `other` and written back
where it was, so a section added by a newer planner survives a read by this one. Plans written
before `schema_version` existed (ddc73a7 and earlier) read as version 0: same keys, written back
without a version; a plan of a newer version is refused (scaling.core.typed_record says why).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaling.core.errors import InputError
from scaling.core.typed_record import TypedRecord

SCHEMA_VERSION = 1


@dataclass(init=False, eq=False, repr=False)
class PlanRecord(TypedRecord):
    """A plan's top-level keys, in the order make_plan writes them. Nested sections stay dicts; their
    keys are documented where they are built (named beside each field)."""

    SCHEMA_VERSION = SCHEMA_VERSION
    REQUIRED = ("compute", "warnings")

    compute: float | None = None  # FLOPs the plan is made for, in `conventions.compute`
    ci: float | None = None  # interval level
    conventions: dict[str, Any] | None = None  # {compute, n_kind}: the chinchilla record's
    fits: list[dict[str, Any]] | None = None  # [{law, approach, data_sha256}] of the records used
    loss_at_optimum: float | None = None  # approach 3 only
    data_constrained: dict[str, Any] | None = None  # a data-constrained law with unique tokens
    N_opt: float | None = None
    D_opt: float | None = None
    n_kind: str | None = None
    N_opt_interval: list[float] | None = None
    D_opt_interval: list[float] | None = None
    extrapolation_factor: float | None = None  # compute / the largest fitted run's
    recipe: dict[str, Any] | None = None  # {settings, data}: the fits' training recipe
    vocab_size: int | None = None
    run: dict[str, Any] | None = None  # the run to train (plan._choose_run; priced_model_plan with --model)
    lr: float | None = None  # batch-lr without a run: at N_opt, D_opt (else inside `run`)
    batch_tokens: float | None = None
    lr_interval: list[float] | None = None
    batch_tokens_interval: list[float] | None = None
    B_crit_tokens: float | None = None  # with a critical-batch record
    B_crit_from: str | None = None
    warnings: list[str] = field(default_factory=list)
    given_model: str | None = None  # --model CONFIG (scaling.planning.layout.priced_model_plan)
    memory: dict[str, Any] | None = None  # --device: layout and memory (scaling.planning.layout.layout_block)
    cost: dict[str, Any] | None = None  # --device: scaling.planning.cost.cost_block
    inference: dict[str, Any] | None = None  # --inference-tokens: scaling.planning.inference.inference_block
    accuracy: dict[str, Any] | None = None  # --accuracy: task -> prediction (scaling.planning.accuracy_chain)
    accuracy_basis: dict[str, Any] | None = None
    emitted_config: str | None = None  # --emit-config
    emitted_sweep: str | None = None

    @classmethod
    def load(cls, path: str | Path) -> PlanRecord:
        """A plan file (`scalelab plan --out`), this version's or an older one."""
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except FileNotFoundError:
            raise InputError(f"plan not found: {p}") from None
        except (OSError, ValueError) as exc:
            raise InputError(f"{p}: not a JSON plan ({exc})") from None
        if not isinstance(data, dict) or "compute" not in data:
            raise InputError(f"{p}: not a plan (no compute)")
        try:
            return cls.from_dict(data)
        except InputError as exc:
            raise InputError(f"{p}: {exc}") from None
