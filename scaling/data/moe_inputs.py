"""`scalelab fit moe` inputs: a table or a tree of run directories as one canonical MoE table.

Columns: N (active non-embedding parameters), D (tokens), G (granularity = dense d_ff / expert
d_ff), E (routed experts), loss, and when known top_k, expansion (E / G), shared_experts,
capacity_factor, router, params (total), flops, run, path. Dense runs are E = 1, G = 1.

Run directories (finished runs, through the run registry): N = `active_non_embedding_params`,
D = `tokens`, loss = `final_val_loss` (else `final_loss`) from summary.json; the MoE shape from
summary.json's `moe` section (`models.moe.accounting.moe_summary`) when the run wrote one, else
computed from config.yaml's `model` section by the same function.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from models.config import ModelConfig
from models.moe.accounting import moe_summary
from rundir.files import read_yaml
from rundir.layout import CONFIG, SUMMARY
from rundir.read import load_runs
from scaling.core.errors import InputError
from scaling.data import inputs
from scaling.data.columns import resolve_columns
from scaling.data.table_files import read_table

ROLES = ("N", "D", "G", "E", "loss", "top_k", "flops")
ALIASES: dict[str, tuple[str, ...]] = {
    "N": ("n", "n_active", "active_non_embedding_params"),
    "D": inputs.ALIASES["D"],
    "G": ("g", "granularity"),
    "E": ("e", "experts", "num_experts"),
    "loss": inputs.ALIASES["loss"],
    "top_k": ("top_k", "k"),
    "flops": ("flops", "training_flop", "training flop"),
}
PASSTHROUGH = (
    "run",
    "sweep",
    "path",
    "params",
    "active_params",
    "non_embedding_params",
    "expansion",
    "shared_experts",
    "capacity_factor",
    "router",
    "expert_d_ff",
    "flops_per_token",
    "epochs",
    "unique_tokens",
    "moe_source",
)
TEXT = ("run", "sweep", "path", "router", "moe_source")
N_KIND = "active_non_embedding"


def load_moe(source, columns: dict[str, str] | None = None) -> inputs.Dataset:
    """DATA (DataFrame, .csv/.parquet, or run-directory tree) as the canonical MoE Dataset."""
    import pandas as pd  # deferred: pandas is slow to import

    columns = dict(columns or {})
    if isinstance(source, pd.DataFrame):
        raw, desc, warnings = source.copy(), "DataFrame", []
    else:
        path = Path(source)
        desc = str(path)
        if not path.exists():
            raise InputError(f"data not found: {path}")
        if path.is_dir():
            raw, warnings = read_moe_runs(path)
            mapping = {r: r for r in ROLES if r in raw.columns}
            return _canonical(raw, mapping, desc, warnings, "active_non_embedding_params from summary.json")
        raw, warnings = read_table(path), []
    mapping = resolve_columns(raw, columns, ROLES, ALIASES)
    source_n = f"column '{mapping['N']}'" if "N" in mapping else ""
    return _canonical(raw, mapping, desc, warnings, source_n)


def _canonical(raw, mapping: dict[str, str], desc: str, warnings: list[str], n_source: str) -> inputs.Dataset:
    import pandas as pd  # deferred: pandas is slow to import

    df = pd.DataFrame(index=raw.index)
    for role, col in mapping.items():
        df[role] = pd.to_numeric(raw[col], errors="coerce")
        bad = raw[col].notna() & df[role].isna()
        if bad.any():
            raise InputError(f"column '{col}' ({role}) has non-numeric values, e.g. {raw[col][bad].iloc[0]!r}")
    lower = {str(c).strip().lower(): c for c in raw.columns}
    for extra in PASSTHROUGH:
        found = lower.get(extra)
        if found is not None and extra not in df.columns:
            df[extra] = raw[found].astype(str) if extra in TEXT else pd.to_numeric(raw[found], errors="coerce")
    return inputs.Dataset(
        df=df.reset_index(drop=True),
        source=desc,
        n_kind=N_KIND,
        columns={k: str(v) for k, v in mapping.items()},
        warnings=list(warnings),
        n_source=n_source,
    )


def check_shapes(ds: inputs.Dataset) -> None:
    """E whole experts (E = 1: dense); the roles' positivity is `inputs.validate`'s."""
    if "E" in ds.df.columns:
        e = ds.df["E"].to_numpy(float)
        bad = np.flatnonzero(np.isfinite(e) & (np.abs(e - np.round(e)) > 1e-9))
        if bad.size:
            raise InputError(
                f"column '{ds.columns.get('E', 'E')}' (E) must count whole "
                f"experts (1 = dense); row {int(bad[0])} has {e[bad[0]]:g}"
            )


# ---------------------------------------------------------------- run directories
def read_moe_runs(root: Path):
    """Finished runs under `root` as (DataFrame, warnings); broken runs become warnings."""
    import pandas as pd  # deferred: pandas is slow to import

    table, problems = load_runs(root)
    warnings = [f"run {os.path.relpath(p['path'], root)}: {p['problem']}" for p in problems]
    rows, skipped = [], 0
    for rec in table.to_dict("records"):
        rel = os.path.relpath(rec.get("path", rec.get("run", "?")), root)
        if rec.get("status") != "done":
            skipped += 1
            continue
        row, why = _run_row(Path(rec["path"]), rel, rec.get("sweep") or Path(rel).parent.name)
        if row is None:
            warnings.append(f"run {rel}: {why}; skipped")
        else:
            rows.append(row)
    if skipped:
        warnings.append(f"skipped {skipped} unfinished run(s) (status other than 'done')")
    if not rows:
        raise InputError(
            f"{root}: no finished runs with N, tokens, loss and a model config found"
            + (f"; {'; '.join(warnings)}" if warnings else "")
        )
    return pd.DataFrame(rows), warnings


def _num(v):
    return inputs._num(v)


def _run_row(path: Path, rel: str, sweep: str):
    try:
        summary = json.loads((path / SUMMARY).read_text())
    except (OSError, ValueError):
        return None, "summary.json unreadable"
    moe, where = summary.get("moe"), SUMMARY
    if not isinstance(moe, dict):
        moe, why = moe_from_config(path)
        if moe is None:
            return None, why
        where = CONFIG
    loss = _num(summary.get("final_val_loss"))
    loss = loss if loss is not None else _num(summary.get("final_loss"))
    N = _num(summary.get("active_non_embedding_params"))
    N = N if N is not None else _num(moe.get("active_non_embedding_params"))
    D = _num(summary.get("tokens"))
    missing = [
        k
        for k, v in (("active_non_embedding_params", N), ("tokens", D), ("final_val_loss/final_loss", loss))
        if v is None
    ]
    if missing:
        return None, f"summary.json lacks {', '.join(missing)}"
    row = {
        "run": rel,
        "sweep": sweep,
        "path": str(path),
        "N": N,
        "D": D,
        "loss": loss,
        "G": _num(moe.get("granularity")),
        "E": _num(moe.get("experts")),
        "top_k": _num(moe.get("top_k")),
        "flops": _num(summary.get("flops")),
        "moe_source": where,
    }
    for k in ("expansion", "shared_experts", "capacity_factor", "expert_d_ff"):
        row[k] = _num(moe.get(k))
    row["router"] = moe.get("router")
    for k in ("params", "active_params", "non_embedding_params", "flops_per_token", "epochs", "unique_tokens"):
        row[k] = _num(summary.get(k))
    return row, None


def moe_from_config(path: Path):
    """moe_summary of the run's resolved model config, or (None, why) (also the dashboard's MoE shape of a run)."""
    try:
        cfg = read_yaml(path / CONFIG)  # the C loader: read for every MoE run of a tree
        model = dict(cfg["model"])
        vocab = model.get("vocab_size") or ((cfg.get("data") or {}).get("tokenizer") or {}).get("vocab_size")
        return moe_summary(ModelConfig(**model), vocab), None
    except Exception as exc:  # a run we cannot describe is skipped with its reason, never fatal
        return (
            None,
            f"no `moe` section in summary.json and config.yaml's model is unreadable ({type(exc).__name__}: {exc})",
        )
