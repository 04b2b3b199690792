"""The data behind a fit record, re-read with the reader its fitter used (by law).

`read(rec, path)` -> a list of plain rows (or, for `lr-annealing`, one row per curve):
  chinchilla, kaplan, batch-lr, critical-batch: scaling.data.inputs.load -> N, D, loss, flops, lr, ...
  moe:          scaling.data.moe_inputs.load_moe -> N (active non-embedding), D, G, E, top_k, router, loss
  task-loss:    scaling.data.eval_points.read_eval_points (run tree) / scaling.fits.task_loss.table_points
                -> task, N, D, loss, acc, flops
  accuracy:     scaling.fits.accuracy.load_runs (run tree) / load_table -> task, loss, acc, chance
  lr-annealing: scaling.fits.lr_annealing.curves.load_curves -> {run, lr, lo, hi, loss} per curve
with the reading options the record states (settings, columns, n_kind). `path` has already been
confined to the served roots (dashboard.stores.fits). Torch-free.
"""

from __future__ import annotations

from pathlib import Path

from scaling.data.eval_points import LOSS_METRICS, read_eval_points
from scaling.data.inputs import load
from scaling.data.moe_inputs import load_moe
from scaling.fits import accuracy
from scaling.fits.lr_annealing.curves import load_curves
from scaling.fits.task_loss import table_points

CANONICAL = ("N", "D", "loss", "flops", "lr", "batch_tokens", "steps", "run")
MOE = ("N", "D", "G", "E", "top_k", "loss", "flops", "router", "run", "expansion")
CHAIN = ("task", "N", "D", "loss", "acc", "chance", "flops", "run", "step")


def n_kind(rec: dict) -> str:
    kind = str(rec.get("n_kind") or "total")
    for k in ("non_embedding", "active", "total"):  # scaling.core.conventions.N_KINDS
        if kind.startswith(k):
            return k
    return "total"


def _cli_metric(record_name: str | None, default: str = "bpb") -> str:
    """The record's loss metric (gold_bpb) as the reader's option (bpb)."""
    inv = {v: k for k, v in LOSS_METRICS.items()}
    return inv.get(record_name or "", record_name if record_name in LOSS_METRICS else default)


def _rows(df, keep) -> list[dict]:
    cols = [c for c in keep if c in df.columns]
    return df[cols].to_dict("records")


def read(rec: dict, p: Path) -> list[dict]:
    law, st = rec.get("law"), rec.get("settings") or {}
    is_dir = p.is_dir()
    if law == "moe":
        return _rows(load_moe(p, None if is_dir else (rec.get("columns") or None)).df, MOE)
    if law == "task-loss":
        tasks = st.get("tasks")
        if is_dir:
            df, _ = read_eval_points(
                p,
                n_kind=n_kind(rec),
                steps=st.get("steps") or "last",
                loss_metric=_cli_metric(st.get("loss_metric")),
                tasks=tasks,
            )
        else:
            df, _, _ = table_points(p, dict(st.get("columns") or {}), tasks, n_kind(rec))
        return _rows(df, CHAIN)
    if law == "accuracy":
        if is_dir:
            df, _, _ = accuracy.load_runs(
                p,
                loss_metric=_cli_metric(st.get("loss_metric")),
                acc_metric=st.get("acc_metric") or "acc",
                steps=st.get("steps") or "last",
                tasks=st.get("tasks"),
            )
        else:
            df, _ = accuracy.load_table(p, dict(st.get("columns") or {}))
            if st.get("tasks") and "task" in df.columns:
                df = df[df["task"].astype(str).isin(st["tasks"])]
        if "task" in df.columns:
            df = df.assign(task=df["task"].astype(str))
        return _rows(df, CHAIN)
    if law == "lr-annealing":
        curves, _, _, _ = load_curves(
            p, metric=st.get("metric") or "loss", columns=None if is_dir else (st.get("columns") or None)
        )
        return [
            {"run": c.name, "lr": c.lr.tolist(), "lo": c.lo.tolist(), "hi": c.hi.tolist(), "loss": c.loss.tolist()}
            for c in curves
        ]

    ds = load(p, columns=None if is_dir else (rec.get("columns") or None), n_kind=n_kind(rec))
    return _rows(ds.df, CANONICAL)
