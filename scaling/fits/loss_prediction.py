"""Loss at new points for the loss-law families (Chinchilla approach 3, plain or data-constrained; Kaplan;
MoE, whose model and reader are scaling.fits.moe.prediction's; task loss, one Chinchilla law per task).

`predict_loss_rows` reads the data as the record's fit read it (`scaling.data.inputs`, or the family's own reader),
with the record's conventions: N of its kind, its compute convention (for the range check), the unique tokens
a data-constrained law needs (column U, else the fitted runs' data set, said). A family gives the roles its law
reads (`roles(rec)`) and its point and bootstrap predictions (`model(rec, df, roles)`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from scaling.core.errors import InputError
from scaling.data import inputs
from scaling.data.columns import parse_columns
from scaling.data.eval_points import read_eval_points
from scaling.fits.prediction import (
    Prediction,
    add_columns,
    compute_for,
    extrapolation,
    finish,
    input_columns,
    interval_kind,
    log_intervals,
    n_kind,
    residuals,
    samples,
)
from scaling.fits.record import FitRecord
from scaling.fits.task_loss import table_points
from scaling.laws.loss import ChinchillaLaw, DataConstrainedLaw, KaplanLaw

TASK_ROLES = inputs.ROLES + ("task",)
Roles = Callable[[FitRecord], tuple[str, ...]]
Model = Callable[[FitRecord, object, tuple[str, ...]], tuple[np.ndarray, np.ndarray | None]]


def chinchilla_roles(rec) -> tuple[str, ...]:
    """N, D; and U, the unique tokens, for a data-constrained law."""
    return ("N", "D", "U") if (rec.get("settings") or {}).get("law") == "data-constrained" else ("N", "D")


def chinchilla_model(rec, df, roles):
    """(point predictions (P,), bootstrap draws (S, P) or None) of an approach-3 record (plain or
    data-constrained) at the rows of df."""
    st, p = rec.get("settings") or {}, rec["params"]
    x = {r: df[r].to_numpy(float) for r in roles}
    dc = st.get("law") == "data-constrained"
    keys = ["E", "A", "B", "alpha", "beta"]
    if dc:
        keys += ["R_D_star"] + (["R_N_star"] if p.get("R_N_star") is not None else [])
    extra = {"U": x["U"]} if dc else {}
    point = rec.law().predict(x["N"], x["D"], **extra)
    s = samples(rec, keys)
    draws = (DataConstrainedLaw if dc else ChinchillaLaw)(**s).predict(x["N"], x["D"], **extra) if s else None
    return as_arrays(point, draws, len(df))


def kaplan_roles(rec) -> tuple[str, ...]:
    form = (rec.get("settings") or {}).get("form", "nd")
    return {"nd": ("N", "D"), "n": ("N",), "d": ("D",)}[form]


def kaplan_model(rec, df, roles):
    st, p = rec.get("settings") or {}, rec["params"]
    x = {r: df[r].to_numpy(float) for r in roles}
    point = rec.law().predict(N=x.get("N"), D=x.get("D"))
    keys = [k for k in ("Nc", "alphaN", "Dc", "alphaD") if p.get(k) is not None]
    s = samples(rec, keys)
    draws = KaplanLaw(form=st.get("form", "nd"), **s).predict(N=x.get("N"), D=x.get("D")) if s else None
    return as_arrays(point, draws, len(df))


def as_arrays(point, draws, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    with np.errstate(all="ignore"):
        return np.asarray(point, dtype=float) * np.ones(n), None if draws is None else np.asarray(draws, dtype=float)


def read_table_or_runs(rec, data, columns):
    """DATA as scaling.data.inputs reads it for the fits, N of the record's kind."""
    return inputs.load(data, parse_columns(columns, inputs.ROLES), n_kind(rec))


def _read_loss(rec, data, columns, roles, read, check):
    """The data as the record's fit read it: canonical columns with N of the record's kind."""
    law, st = rec["law"], rec.get("settings") or {}
    warnings: list[str] = []
    ds = read(rec, data, columns)
    df = ds.df
    if "U" in roles and "U" not in df.columns:
        unique = (rec.get("data") or {}).get("unique_tokens")
        if not unique:
            raise InputError(
                "a data-constrained law needs each point's unique tokens: a column U (or unique_tokens, "
                "u_d; --col U=NAME); the fit's record states no data set of its own to assume"
            )
        df = df.assign(U=float(unique))
        warnings.append(
            f"no unique-token column: every point is read as drawing from the fitted runs' {unique:.4g} unique tokens"
        )
    name = f"{law}" + (f" --law {st['law']}" if st.get("law") else "")
    checked = inputs.Dataset(df=df, source=ds.source, n_kind=ds.n_kind, columns=ds.columns)
    inputs.validate(checked, roles, min_points=1, law=f"predict ({name})")
    if check is not None:
        check(rec, ds)
    return ds, df, warnings


def predict_loss_rows(
    rec,
    data,
    columns: list[str] | None,
    ci: float,
    seed: int,
    *,
    roles: Roles,
    model: Model,
    read: Callable = read_table_or_runs,
    check: Callable | None = None,
) -> Prediction:
    """A loss law's predictions at DATA's rows: `roles(rec)` the inputs it reads, `model(rec, df, roles)` its
    point and bootstrap predictions, `read(rec, data, columns)` DATA as its fit read it (a Dataset), `check(rec,
    dataset)` what else the data must satisfy."""
    rng = np.random.default_rng(seed)
    law_roles = roles(rec)
    ds, df, warnings = _read_loss(rec, data, columns, law_roles, read, check)
    point, draws = model(rec, df, law_roles)
    values = {r: df[r] for r in law_roles}
    C = compute_for(rec, df, ds.n_kind, warnings)
    if C is not None:
        values["C"] = C
    ranges = rec.get("data_range") or {}
    if not ranges:
        warnings.append("the record states no fitted range (an older record): extrapolation not checked")
    lo, hi = log_intervals(point, draws, residuals(rec), ci, rng)
    out = input_columns(df, law_roles)
    if C is not None:
        out["C"] = C
    add_columns(out, "loss", True, point, lo, hi, df["loss"].to_numpy(float) if "loss" in df.columns else None)
    f = extrapolation(values, ranges)
    out["extrapolation_factor"] = f if f is not None else np.nan
    conv = {
        "n_kind": ds.n_kind,
        "n_source": ds.n_source,
        "compute": (rec.get("conventions") or {}).get("compute"),
        "source": ds.source,
    }
    if "U" in law_roles:
        given = "U" in ds.df.columns
        conv["unique_tokens"] = f"column {ds.columns.get('U', 'U')}" if given else "the fitted runs' data"
    return finish(out, ["loss"], conv, interval_kind(draws is not None), warnings, ci)


def predict_task_loss_rows(rec, data, columns: list[str] | None, ci: float, seed: int) -> Prediction:
    """Each task's loss under its own Chinchilla law (a task-loss record holds one per task)."""
    import pandas as pd  # deferred: pandas is slow to import

    rng = np.random.default_rng(seed)
    st, kind = rec.get("settings") or {}, n_kind(rec)
    per = rec.get("tasks") or {}
    if isinstance(data, (str, Path)) and Path(data).is_dir():
        metric = {"gold_bpb": "bpb", "gold_nats": "nats"}.get(st.get("loss_metric") or "", "bpb")
        df, warnings = read_eval_points(data, n_kind=kind, steps="last", loss_metric=metric)
        source = str(data)
    else:
        df, source, warnings = table_points(data, parse_columns(columns, TASK_ROLES), None, kind)
        if len(per) == 1 and set(df["task"]) == {"task"}:  # a table without a task column: the record's one task
            df = df.assign(task=next(iter(per)))
    unknown = sorted(set(df["task"]) - set(per))
    df = df[df["task"].isin(per)].reset_index(drop=True)
    if df.empty:
        raise InputError(
            f"no task of the data is in the task-loss fit (fit: {', '.join(per)}; data: {', '.join(unknown)})"
        )
    if unknown:
        warnings.append(f"task(s) without a law in the fit left out: {', '.join(unknown)}")
    parts = []
    kinds = set()
    for task, g in df.groupby("task", sort=False):
        sub = FitRecord(per[task])
        point, draws = chinchilla_model(sub, g, ("N", "D"))
        lo, hi = log_intervals(point, draws, residuals(sub), ci, rng)
        kinds.add(draws is not None)
        out = input_columns(g, ("N", "D"))
        C = compute_for(sub, g, kind, warnings)
        values = {"N": g["N"], "D": g["D"], **({"C": C} if C is not None else {})}
        add_columns(out, "loss", True, point, lo, hi, g["loss"].to_numpy(float))
        f = extrapolation(values, sub.get("data_range") or {})
        out["extrapolation_factor"] = f if f is not None else np.nan
        parts.append(out)
    frame = pd.concat(parts, ignore_index=True)
    conv = {
        "n_kind": kind,
        "loss_metric": st.get("loss_metric"),
        "compute": (rec.get("conventions") or {}).get("compute"),
        "source": source,
    }
    return finish(frame, ["loss"], conv, interval_kind(all(kinds)), sorted(set(warnings), key=warnings.index), ci)
