"""Run registry: run directories -> one pandas table, for the fitter, notebooks and dashboard.

    from launch.registry import load_runs
    df, problems = load_runs("runs/isoflop-tiny")

One row per run directory found under `root` (any depth): summary.json fields (among them
`epochs`, passes over the training split's unique tokens, and `unique_tokens`), the sweep axes
(`axis.<name>` columns, from `extras.axes`), key model/train config values, and a status
for unfinished runs. A malformed or half-written directory becomes an entry in `problems`
({path, problem}) instead of an exception: one bad run never hides the other 999.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from launch.status import run_status

MARKERS = ("config.yaml", "summary.json", "metrics.jsonl", "launch.yaml")
SKIP_DIRS = {"checkpoints", "wandb", "evals", ".sweep", "__pycache__", "data"}
SUMMARY_COLUMNS = [
    "steps", "total_steps", "tokens", "params", "non_embedding_params", "active_params", "active_non_embedding_params",
    "flops_per_token", "flops", "batch_tokens", "batch_size", "lr", "final_loss", "final_val_loss", "final_val_bpb",
    "tokens_per_s", "mfu", "wall_s", "world_size", "finished_at", "error", "epochs", "unique_tokens", "peak_lr",
]
# Per-source keys of mixture runs' summaries (`epochs/<label>`, ...), copied as they are.
SOURCE_PREFIXES = ("epochs/", "tokens/", "unique_tokens/", "weight/")
CONFIG_COLUMNS = {
    "model": ("model", "preset"), "d_model": ("model", "d_model"), "n_layers": ("model", "n_layers"),
    "n_heads": ("model", "n_heads"), "seq_len": ("model", "seq_len"), "vocab_size": ("model", "vocab_size"),
    "seed": ("train", "seed"), "micro_batch_size": ("train", "micro_batch_size"), "schedule": ("schedule", "name"),
    "num_experts": ("model", "moe", "num_experts"), "top_k": ("model", "moe", "top_k"),
}
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def find_run_dirs(root: str | Path) -> list[Path]:
    root = Path(root)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        if any(m in filenames for m in MARKERS):
            out.append(Path(dirpath))
            dirnames[:] = []  # a run dir's subfolders are its own (checkpoints, evals)
            continue
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
    return sorted(out)


def _dig(d: Any, path: tuple) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def read_run(run_dir: Path) -> tuple[dict | None, str | None]:
    """(row, problem). A row may come with a problem (e.g. torn config) when enough is readable."""
    row: dict[str, Any] = {"run": run_dir.name, "path": str(run_dir)}
    problem = None
    summary = None
    sp = run_dir / "summary.json"
    if sp.exists():
        try:
            summary = json.loads(sp.read_text())
            if not isinstance(summary, dict):
                raise ValueError("not a JSON object")
        except (ValueError, UnicodeDecodeError) as exc:
            return None, f"summary.json unreadable (half-written or corrupt: {exc})"
    cfg = None
    for name in ("config.yaml", "launch.yaml"):
        cp = run_dir / name
        if cp.exists():
            try:
                cfg = yaml.load(cp.read_text(), Loader=_Loader)
                if not isinstance(cfg, dict):
                    raise ValueError("not a mapping")
            except (yaml.YAMLError, ValueError, UnicodeDecodeError) as exc:
                problem = f"{name} unreadable ({type(exc).__name__})"
                cfg = None
            break
    if summary is None and cfg is None:
        if not (run_dir / "metrics.jsonl").exists():
            return None, problem or "neither summary.json nor a readable config.yaml"
    extras = (summary or {}).get("extras") or (cfg or {}).get("extras") or {}
    row["sweep"] = extras.get("sweep")
    row["run_id"] = extras.get("run_id")
    st = run_status(run_dir)
    row["status"] = st.state
    if summary:
        for k in SUMMARY_COLUMNS:
            row[k] = summary.get(k)
        for k, v in summary.items():
            if k.startswith(SOURCE_PREFIXES):
                row[k] = v
    else:
        row.update({"steps": st.step, "total_steps": st.total_steps, "tokens": st.tokens, "final_loss": st.loss,
                    "final_val_loss": st.val_loss, "wall_s": st.wall_s, "epochs": st.epochs})
        if cfg:
            row["lr"] = _dig(cfg, ("optim", "lr"))
            row["batch_size"] = _dig(cfg, ("train", "global_batch_size"))
    row["last_loss"] = st.loss
    if cfg:
        for col, path in CONFIG_COLUMNS.items():
            row[col] = _dig(cfg, path)
        row["name"] = cfg.get("name")
    for k, v in (extras.get("axes") or {}).items():
        row[f"axis.{k}"] = v
    return row, problem


def load_runs(root: str | Path) -> tuple["pd.DataFrame", list[dict]]:  # noqa: F821
    """All runs under `root` as a DataFrame (one row per run) plus the problems found."""
    import pandas as pd

    root = Path(root)
    rows, problems = [], []
    if not root.exists():
        return pd.DataFrame(columns=["run", "path", "status"]), [{"path": str(root), "problem": "does not exist"}]
    for d in find_run_dirs(root):
        try:
            row, problem = read_run(d)
        except Exception as exc:  # never let one directory stop the scan
            row, problem = None, f"{type(exc).__name__}: {exc}"
        if problem:
            problems.append({"path": str(d), "problem": problem})
        if row is not None:
            rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(columns=["run", "path", "status"])
    return df, problems
