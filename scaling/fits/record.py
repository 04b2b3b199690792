"""The fit record: one JSON document per fit, read by `plan`, the dashboard and notebooks.

A typed, versioned record (scaling.core.typed_record, RunSummary's pattern): the keys every law
writes are fields, a law's own keys (`models`, `derived`, `tasks`, `compare`, ...) are kept in
`other`, and dict access (`rec["params"]`, `.get`, `in`) still works for the notebooks for a release.
Keys: law, approach, params, intervals (name -> [lo, hi]), objective, n_points, warnings,
data_sha256, plus settings, diagnostics, n_kind, columns, source, and (when bootstrapped)
bootstrap.samples so that consumers can propagate uncertainty to any derived quantity.
How to read the keys one law adds lives here too, beside the format: `has_exponents` and
`optima_lines` (batch-lr), `frontier_weights` (approach 2; older records have no key).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scaling.core.errors import InputError
from scaling.core.typed_record import TypedRecord
from scaling.laws.registry import from_record

# 1: the first versioned records (ddc73a7 wrote them as a dict); the typed record reads and writes the same keys.
SCHEMA_VERSION = 1


def data_sha256(df, columns) -> str:
    """SHA-256 of the fitted table: for each column (in order) its name and float64 bytes.
    Identical numbers in the same order give the same hash whatever file they came from."""
    h = hashlib.sha256()
    for c in columns:
        h.update(str(c).encode())
        h.update(np.ascontiguousarray(df[c].to_numpy(dtype="<f8")).tobytes())
    return h.hexdigest()


def _clean(obj: Any) -> Any:
    """Make numpy scalars/arrays JSON-safe; NaN/inf become None (strict JSON)."""
    if isinstance(obj, Mapping):  # a dict or a typed record (its JSON object)
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        obj = float(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


@dataclass(init=False, eq=False, repr=False)
class FitRecord(TypedRecord):
    """A fit's record, the same from the CLI and the Python API. `FitRecord(d)` and `FitRecord.load(path)`
    build one from the JSON object; `rec.law()` is the law object (the key `law`, the law's name, is
    the attribute `law_name`)."""

    SCHEMA_VERSION = SCHEMA_VERSION
    REQUIRED = ("law", "approach", "params", "intervals", "objective", "n_points", "warnings", "data_sha256")

    law_name: str | None = field(default=None, metadata={"key": "law"})  # chinchilla | kaplan | batch-lr | ...
    approach: int | None = None  # chinchilla's 1, 2 or 3; None for the other laws
    params: dict[str, Any] = field(default_factory=dict)  # name -> point estimate (None: not identified)
    intervals: dict[str, Any] = field(default_factory=dict)  # name -> [lo, hi] at settings.ci
    objective: float | None = None
    n_points: int | None = None
    warnings: list[str] = field(default_factory=list)
    data_sha256: str | None = None  # of the fitted table (`data_sha256`)
    n_kind: str | None = None  # total | non_embedding | active
    conventions: dict[str, Any] | None = None  # {n_kind, n_source, compute, ...} (scaling.core.conventions)
    source: str | None = None  # the table or run tree fitted
    columns: dict[str, Any] | None = None  # role -> column of a table
    settings: dict[str, Any] | None = None  # the fit's options as used
    data_range: dict[str, Any] | None = None  # quantity -> [min, max] of the fitted points
    diagnostics: dict[str, Any] | None = None
    bootstrap: dict[str, Any] | None = None  # {n, seed, ci, samples: name -> draws, failed, ...}
    holdout: dict[str, Any] | None = None  # scaling.fits.pipeline.holdout_report
    recipe: dict[str, Any] | None = None  # the fitted runs' training recipe (scaling.data.recipe)
    data: dict[str, Any] | None = None  # the fitted runs' data set ({unique_tokens, ...})
    by: str | None = None  # --by KEY: one law per value (scaling.fits.by)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(_clean(self.to_dict()), indent=indent, allow_nan=False)

    @classmethod
    def load(cls, path: str | Path) -> FitRecord:
        p = Path(path)
        if not p.exists():
            raise InputError(f"fit record not found: {p}")
        try:
            data = json.loads(p.read_text())
        except json.JSONDecodeError as exc:
            raise InputError(f"{p}: not a JSON fit record ({exc})") from None
        if not isinstance(data, dict):
            raise InputError(f"{p}: not a fit record (not a JSON object)")
        missing = [k for k in ("law", "params") if k not in data]
        if missing:
            raise InputError(f"{p}: not a fit record (missing {', '.join(missing)})")
        try:
            return cls.from_dict(data)
        except InputError as exc:
            raise InputError(f"{p}: {exc}") from None

    def law(self):
        """The law object (with `predict`) for this record's point estimate."""
        return from_record(self)

    def summary(self) -> str:
        """A short human-readable table of parameters and intervals."""
        lines = [
            f"law: {self['law']}" + (f" (approach {self['approach']})" if self.get("approach") else ""),
            f"points: {self.get('n_points')}",
        ]
        conv = self.get("conventions")
        if conv:
            lines.append(
                f"conventions: N = {conv.get('n_kind')} parameters"
                + (f" ({conv['n_source']})" if conv.get("n_source") else "")
                + (f", compute = {conv['compute']}" if conv.get("compute") else "")
            )
        weights = frontier_weights(self)
        if weights is not None:  # approach 2
            lines.append(f"frontier: {WEIGHTS_TEXT[weights]}")
        if self.get("objective") is not None:
            mle = (self.get("settings") or {}).get("objective") == "mle"
            lines.append(f"objective{' (negative log-likelihood)' if mle else ''}: {self['objective']:.10g}")
        ivs = self.get("intervals") or {}
        for k, v in self["params"].items():
            if isinstance(v, (int, float)) and v is not None:
                iv = ivs.get(k)
                s = f"  {k:>12} = {v:.6g}"
                if iv and None not in iv:
                    s += f"   [{iv[0]:.6g}, {iv[1]:.6g}]"
                lines.append(s)
        if self.get("law") == "batch-lr":  # each group's optimum; with fewer than 3 groups that is all there is
            st = self.get("settings") or {}
            if st.get("exponents", "fitted") != "fitted":
                lines.append(f"exponents: {st['exponents']}")
            lines += ["per-group optima:"] + optima_lines(self)
        for m in self.get("models") or []:  # critical-batch: one line per model size
            iv = m.get("B_crit_interval")
            lines.append(
                f"  N={m['N']:.4g}: S_min={m['S_min']:.4g} E_min={m['E_min']:.4g} B_crit={m['B_crit']:.4g}"
                + (f" [{iv[0]:.4g}, {iv[1]:.4g}]" if iv else "")
            )
        ho = self.get("holdout")
        if ho:
            what = f"held out {ho.get('rule') or str(ho['n_points']) + ' largest runs'}"
            if ho.get("mean_abs_rel_error") is not None:
                lines.append(
                    f"holdout ({what}): {ho.get('quantity', 'loss')} mean |rel err| "
                    f"{ho['mean_abs_rel_error']:.4g}, max {ho['max_abs_rel_error']:.4g}"
                )
            else:
                lines.append(f"holdout ({what}): {ho.get('note', 'no error computed')}")
        for w in self.get("warnings", []):
            lines.append(f"warning: {w}")
        return "\n".join(lines)


def make_record(**fields) -> FitRecord:
    """Build a FitRecord, cleaning values and checking the required keys are present."""
    rec = FitRecord(_clean(fields))
    # where ddc73a7's records had it: after the keys given here, before the sections a fitter adds later
    rec["schema_version"] = fields.get("schema_version", SCHEMA_VERSION)
    missing = rec.missing()
    if missing:  # programming error, not user error
        raise KeyError(f"fit record lacks {missing}")
    return rec


def has_exponents(rec) -> bool:
    """Whether a batch-lr record holds a law (records of fewer than `fits.batch_lr.MIN_GROUPS` groups hold
    per-group optima only)."""
    st = rec.get("settings") or {}
    return st.get("exponents", "fitted") == "fitted" and bool(rec.get("params"))


def optima_lines(rec) -> list[str]:
    """Each group's optimum, one line each (printed with every batch-lr record)."""
    out = []
    for g in (rec.get("diagnostics") or {}).get("groups") or []:
        compute = (rec.get("settings") or {}).get("form", "compute") == "compute"
        where = f"C ~ {g['C']:.3g}" if compute else f"N ~ {g['N']:.3g}, D ~ {g['D']:.3g}"
        edge = " (on the grid's edge)" if g.get("lr_on_grid_edge") or g.get("batch_on_grid_edge") else ""
        out.append(
            f"  {where}: optimal lr {g['opt_lr']:.4g}, batch {g['opt_batch_tokens']:.4g} tokens, "
            f"loss {g['opt_loss']:.4g} ({g['optimum']}, {g['n_runs']} runs){edge}"
        )
    return out


WEIGHTS_TEXT = {
    "ols": "OLS of log N_opt, log D_opt on log C over budgets (Hoffmann et al. 2022, Porian et al. 2024)",
    "inverse-variance": "OLS of log N_opt, log D_opt on log C weighted by 1/var(log N_opt) "
    "(delta method, pooled residual variance)",
}


def frontier_weights(rec) -> str | None:
    """How an approach-2 record's frontier regression weighted its budgets; a record written before
    `settings.frontier_weights` existed was weighted by inverse variance."""
    if rec.get("approach") != 2:
        return None
    return (rec.get("settings") or {}).get("frontier_weights") or "inverse-variance"
