"""`scalelab predict FIT.json DATA`: what a fitted law predicts at new points, against what was measured.

Laws: loss from a Chinchilla approach-3 record (plain or data-constrained), Kaplan, MoE (Krajewski,
Clark) and task-loss records; accuracy from an accuracy record; the optimal lr and batch from a
batch/LR record. Loss curves are `predict-curve`'s.

DATA is a table or a run-directory tree, read as the fits read it (`scaling.data.inputs`, `moe_inputs`,
`task_data`, `accuracy`), with the record's conventions: N of the record's kind, its compute
convention (C for batch/LR laws and for the range check), the unique tokens a data-constrained law
needs (column U, else the fitted runs' data set, said), MoE experts and granularity.

Interval: a prediction interval for one new run (scaling.laws.prediction's recipe): every bootstrap law
of the record at the point times a resampled log residual of its fit (additive for accuracy, through
`accuracy_chain.through_sigmoid`); without bootstrap samples the residual scatter alone, said.
Where DATA has a measured value: rel_error = (predicted - measured) / measured and `inside`. A point
outside the fitted range (N, D, C, U, G, E; the loss range for accuracy) gets its extrapolation
factor max(x / hi, lo / x) > 1, the largest over its inputs (1 inside).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scaling.core.bootstrap import interval
from scaling.core.conventions import N_KINDS, compute_column
from scaling.core.errors import InputError
from scaling.core.selection import group_by_tolerance
from scaling.data import inputs
from scaling.data.columns import parse_columns
from scaling.data.eval_points import read_eval_points
from scaling.data.moe_inputs import ROLES as MOE_ROLES
from scaling.data.moe_inputs import check_shapes, load_moe
from scaling.fits.accuracy import ROLES as ACCURACY_ROLES
from scaling.fits.accuracy import load_runs, load_table
from scaling.fits.batch_lr import select_points
from scaling.fits.record import FitRecord, has_exponents
from scaling.fits.task_loss import table_points
from scaling.laws.hparams import ComputeHParamLaw, NDHParamLaw
from scaling.laws.loss import ChinchillaLaw, DataConstrainedLaw, KaplanLaw
from scaling.laws.moe import CLARK_PARAMS, KRAJEWSKI_PARAMS, law_from_params
from scaling.laws.prediction import RESIDUAL_DRAWS
from scaling.planning.accuracy_chain import through_sigmoid

LOSS_LAWS = ("chinchilla", "kaplan", "moe", "task-loss")
TASK_ROLES = inputs.ROLES + ("task",)


@dataclass
class Prediction:
    """The rows (a DataFrame: inputs, then per quantity predicted/lo/hi/measured/rel_error/inside,
    then extrapolation_factor), the summary per quantity, and what the reader has to know."""

    df: object
    quantities: list[str]
    summary: dict
    conventions: dict
    interval_kind: str
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- entry point
def predict(rec, data, columns: list[str] | None = None, *, ci: float = 0.95, seed: int = 0) -> Prediction:
    """Predictions of `rec` (a FitRecord) at the rows of `data` (table path, DataFrame or run tree);
    `columns`: --col ROLE=COLUMN items. InputError (exit 2) when the record and the data do not match."""
    if not 0 < ci < 1:
        raise InputError(f"--ci must be between 0 and 1 (got {ci})")
    law = rec.get("law")
    if rec.get("by"):
        raise InputError(
            f"a {law} --by {rec['by']} record holds one law per value: predict with the record of one value's runs"
        )
    if law == "lr-annealing":
        raise InputError(
            "an lr-annealing fit predicts loss curves of a schedule: use `scalelab predict-curve FIT.json CONFIG`"
        )
    if law == "chinchilla" and rec.get("approach") != 3:
        raise InputError(
            f"a chinchilla approach-{rec.get('approach')} fit is a compute-optimal frontier "
            "(N_opt, D_opt), not a loss law: predict needs an approach-3 fit"
        )
    rng = np.random.default_rng(seed)
    if law in ("chinchilla", "kaplan", "moe"):
        return _loss(rec, data, columns, ci, rng)
    if law == "task-loss":
        return _task_loss(rec, data, columns, ci, rng)
    if law == "accuracy":
        return _accuracy(rec, data, columns, ci, seed)
    if law == "batch-lr":
        return _batch_lr(rec, data, columns, ci, rng)
    raise InputError(
        f"predict does not handle {law!r} fits (it predicts chinchilla approach 3, data-constrained, "
        "kaplan, moe, task-loss, accuracy and batch-lr records)"
    )


# ---------------------------------------------------------------- shared pieces
def _n_kind(rec) -> str:
    kind = (rec.get("conventions") or {}).get("n_kind") or rec.get("n_kind") or "total"
    return kind if kind in N_KINDS else "total"


def _samples(rec_part, keys) -> dict | None:
    """Bootstrap draws of `keys` as (S, 1) arrays (finite rows only), or None."""
    s = (rec_part.get("bootstrap") or {}).get("samples") or {}
    if not keys or not all(k in s for k in keys):
        return None
    n = min(len(s[k]) for k in keys)
    arr = {k: np.asarray([np.nan if v is None else v for v in s[k][:n]], dtype=float) for k in keys}
    ok = np.all([np.isfinite(v) for v in arr.values()], axis=0)
    return {k: v[ok][:, None] for k, v in arr.items()} if ok.sum() >= 2 else None


def _residuals(rec_part, key: str = "residuals_log") -> np.ndarray:
    diag = rec_part.get("diagnostics") or {}
    r = diag.get(key)
    if r:
        return np.asarray(r, dtype=float)
    rms = diag.get("residual_log_rms")
    return np.asarray([-rms, rms], dtype=float) if rms else np.zeros(1)


def _log_intervals(
    point: np.ndarray, draws: np.ndarray | None, resid: np.ndarray, ci: float, rng
) -> tuple[np.ndarray, np.ndarray]:
    """lo, hi of each point: its bootstrap draws (S, P) (or the point alone) times resampled exp(log residuals)."""
    lo, hi = np.full(point.size, np.nan), np.full(point.size, np.nan)
    for j in range(point.size):
        base = point[j : j + 1] if draws is None else draws[:, j]
        base = base[np.isfinite(base)]
        if not base.size:
            continue
        k = RESIDUAL_DRAWS if draws is not None else 5000
        d = (base[:, None] * np.exp(rng.choice(resid, size=(base.size, k)))).ravel()
        iv = interval(d, ci)
        if iv:
            lo[j], hi[j] = iv
    return lo, hi


def _interval_kind(has_draws: bool, additive: bool = False) -> str:
    scatter = "residual scatter of single runs" if not additive else "the accuracy fit's residuals"
    if has_draws:
        return f"prediction interval (parameter bootstrap + {scatter})"
    return f"{scatter} only (the fit has no bootstrap samples: parameter uncertainty not included)"


def _factor(values: dict, ranges: dict) -> np.ndarray:
    """Per row, the largest factor by which an input lies outside its fitted range (1 inside)."""
    out = None
    for k, x in values.items():
        r = ranges.get(k)
        if not r or x is None:
            continue
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.maximum(np.maximum(x / r[1], r[0] / x), 1.0)
        f = np.where(np.isfinite(f), f, 1.0)
        out = f if out is None else np.maximum(out, f)
    return out


def _columns(out, q: str, single: bool, pred, lo, hi, measured) -> None:
    """Add one quantity's columns: predicted, <q>_lo, <q>_hi, measured, rel_error, inside (those
    but the bounds suffixed _<q> when there are several quantities)."""
    sfx = "" if single else f"_{q}"
    out[f"predicted{sfx}"] = pred
    out[f"{q}_lo"], out[f"{q}_hi"] = lo, hi
    if measured is None:
        measured = np.full(len(pred), np.nan)
    measured = np.asarray(measured, dtype=float)
    out[f"measured{sfx}"] = measured
    with np.errstate(divide="ignore", invalid="ignore"):
        out[f"rel_error{sfx}"] = np.where(np.isfinite(measured), (pred - measured) / measured, np.nan)
    has = np.isfinite(measured) & np.isfinite(lo) & np.isfinite(hi)
    out[f"inside{sfx}"] = [bool(lo[i] <= measured[i] <= hi[i]) if has[i] else None for i in range(len(pred))]


def _summary(df, quantities: list[str], single: bool) -> dict:
    out = {}
    f = df["extrapolation_factor"].to_numpy(float) if "extrapolation_factor" in df else np.ones(len(df))
    ext = np.isfinite(f) & (f > 1.0 + 1e-9)
    for q in quantities:
        sfx = "" if single else f"_{q}"
        rel = df[f"rel_error{sfx}"].to_numpy(float)
        m = np.isfinite(rel)
        ins = [v for v in df[f"inside{sfx}"] if v is not None]
        s = {
            "n_points": int(len(df)),
            "n_measured": int(m.sum()),
            "n_extrapolated": int(ext.sum()),
            "max_extrapolation_factor": float(np.max(f)) if len(f) else None,
        }
        if m.any():
            s.update(
                {
                    "mean_abs_rel_error": float(np.mean(np.abs(rel[m]))),
                    "max_abs_rel_error": float(np.max(np.abs(rel[m]))),
                    "mean_rel_error": float(np.mean(rel[m])),
                }
            )
        if ins:
            s["coverage"] = float(np.mean(ins))
            s["n_inside"] = int(sum(ins))
        out[q] = s
    return out


def _finish(frame, quantities, conventions, kind, warnings, ci) -> Prediction:
    single = len(quantities) == 1
    summary = _summary(frame, quantities, single)
    summary["ci"] = ci
    return Prediction(
        df=frame, quantities=quantities, summary=summary, conventions=conventions, interval_kind=kind, warnings=warnings
    )


def _inputs(df, roles) -> object:
    """The output's leading columns: run/task when present, then the roles used."""
    import pandas as pd  # deferred: pandas is slow to import

    out = pd.DataFrame(index=df.index)
    for c in ("run", "task"):
        if c in df.columns:
            out[c] = df[c]
    for r in roles:
        if r in df.columns:
            out[r] = df[r].to_numpy(float)
    return out.reset_index(drop=True)


# ---------------------------------------------------------------- loss laws
def _loss_roles(rec) -> tuple[tuple[str, ...], dict]:
    """(roles the law reads, how its record names its draws' parameters)."""
    law, st = rec["law"], rec.get("settings") or {}
    if law == "kaplan":
        form = st.get("form", "nd")
        return {"nd": ("N", "D"), "n": ("N",), "d": ("D",)}[form], {}
    if law == "moe":
        return (("N", "E") if st.get("law") == "clark" else ("N", "D", "G")), {}
    if st.get("law") == "data-constrained":
        return ("N", "D", "U"), {}
    return ("N", "D"), {}


def _loss_model(rec, df, roles):
    """(point predictions (P,), bootstrap draws (S, P) or None) of a loss record at the rows of df."""
    law, st, p = rec["law"], rec.get("settings") or {}, rec["params"]
    x = {r: df[r].to_numpy(float) for r in roles}
    if law == "kaplan":
        point = rec.law().predict(N=x.get("N"), D=x.get("D"))
        keys = [k for k in ("Nc", "alphaN", "Dc", "alphaD") if p.get(k) is not None]
        s = _samples(rec, keys)
        draws = KaplanLaw(form=st.get("form", "nd"), **s).predict(N=x.get("N"), D=x.get("D")) if s else None
    elif law == "moe":
        clark = st.get("law") == "clark"
        names = CLARK_PARAMS if clark else KRAJEWSKI_PARAMS
        point = rec.law().predict(x["N"], x["E"]) if clark else rec.law().predict(x["N"], x["D"], x["G"])
        s = _samples(rec, [k for k in names if p.get(k) is not None])
        draws = None
        if s:
            arr = {k: s.get(k, np.zeros((next(iter(s.values())).shape[0], 1))) for k in names}
            lw = law_from_params(st.get("law", "krajewski"), arr)
            draws = lw.predict(x["N"], x["E"]) if clark else lw.predict(x["N"], x["D"], x["G"])
    else:
        dc = st.get("law") == "data-constrained"
        keys = ["E", "A", "B", "alpha", "beta"]
        if dc:
            keys += ["R_D_star"] + (["R_N_star"] if p.get("R_N_star") is not None else [])
        extra = {"U": x["U"]} if dc else {}
        point = rec.law().predict(x["N"], x["D"], **extra)
        s = _samples(rec, keys)
        draws = (DataConstrainedLaw if dc else ChinchillaLaw)(**s).predict(x["N"], x["D"], **extra) if s else None
    with np.errstate(all="ignore"):
        point = np.asarray(point, dtype=float) * np.ones(len(df))
        return point, None if draws is None else np.asarray(draws, dtype=float)


def _read_loss(rec, data, columns, roles):
    """The data as the record's fit read it: canonical columns with N of the record's kind."""
    law, st = rec["law"], rec.get("settings") or {}
    warnings: list[str] = []
    if law == "moe":
        ds = load_moe(data, parse_columns(columns, MOE_ROLES))
    else:
        ds = inputs.load(data, parse_columns(columns, inputs.ROLES), _n_kind(rec))
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
    if law == "moe" and st.get("law") != "clark":
        check_shapes(ds)
    return ds, df, warnings


def _compute(rec, df, n_kind: str, warnings: list[str]):
    """C per row in the record's convention, or None (said) when the data cannot give it."""
    conv = (rec.get("conventions") or {}).get("compute")
    if not conv or "D" not in df.columns:
        return None
    if conv == "6ND_active_nonembed":
        return 6.0 * df["N"].to_numpy(float) * df["D"].to_numpy(float)
    try:
        return compute_column(df, conv, n_kind)
    except InputError as exc:
        warnings.append(f"compute not checked against the fitted range: {exc}")
        return None


def _loss(rec, data, columns, ci, rng) -> Prediction:
    roles, _ = _loss_roles(rec)
    ds, df, warnings = _read_loss(rec, data, columns, roles)
    point, draws = _loss_model(rec, df, roles)
    values = {r: df[r] for r in roles}
    C = _compute(rec, df, ds.n_kind, warnings)
    if C is not None:
        values["C"] = C
    ranges = rec.get("data_range") or {}
    if not ranges:
        warnings.append("the record states no fitted range (an older record): extrapolation not checked")
    lo, hi = _log_intervals(point, draws, _residuals(rec), ci, rng)
    out = _inputs(df, roles)
    if C is not None:
        out["C"] = C
    _columns(out, "loss", True, point, lo, hi, df["loss"].to_numpy(float) if "loss" in df.columns else None)
    f = _factor(values, ranges)
    out["extrapolation_factor"] = f if f is not None else np.nan
    conv = {
        "n_kind": ds.n_kind,
        "n_source": ds.n_source,
        "compute": (rec.get("conventions") or {}).get("compute"),
        "source": ds.source,
    }
    if "U" in roles:
        given = "U" in ds.df.columns
        conv["unique_tokens"] = f"column {ds.columns.get('U', 'U')}" if given else "the fitted runs' data"
    return _finish(out, ["loss"], conv, _interval_kind(draws is not None), warnings, ci)


def _task_loss(rec, data, columns, ci, rng) -> Prediction:
    import pandas as pd  # deferred: pandas is slow to import

    st, n_kind = rec.get("settings") or {}, _n_kind(rec)
    per = rec.get("tasks") or {}
    if isinstance(data, (str, Path)) and Path(data).is_dir():
        metric = {"gold_bpb": "bpb", "gold_nats": "nats"}.get(st.get("loss_metric"), "bpb")
        df, warnings = read_eval_points(data, n_kind=n_kind, steps="last", loss_metric=metric)
        source = str(data)
    else:
        df, source, warnings = table_points(data, parse_columns(columns, TASK_ROLES), None, n_kind)
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
        point, draws = _loss_model(sub, g, ("N", "D"))
        lo, hi = _log_intervals(point, draws, _residuals(sub), ci, rng)
        kinds.add(draws is not None)
        out = _inputs(g, ("N", "D"))
        C = _compute(sub, g, n_kind, warnings)
        values = {"N": g["N"], "D": g["D"], **({"C": C} if C is not None else {})}
        _columns(out, "loss", True, point, lo, hi, g["loss"].to_numpy(float))
        f = _factor(values, sub.get("data_range") or {})
        out["extrapolation_factor"] = f if f is not None else np.nan
        parts.append(out)
    frame = pd.concat(parts, ignore_index=True)
    conv = {
        "n_kind": n_kind,
        "loss_metric": st.get("loss_metric"),
        "compute": (rec.get("conventions") or {}).get("compute"),
        "source": source,
    }
    return _finish(frame, ["loss"], conv, _interval_kind(all(kinds)), sorted(set(warnings), key=warnings.index), ci)


# ---------------------------------------------------------------- accuracy
def _accuracy(rec, data, columns, ci, seed) -> Prediction:
    import pandas as pd  # deferred: pandas is slow to import

    st = rec.get("settings") or {}
    per = rec.get("tasks") or {}
    if isinstance(data, (str, Path)) and Path(data).is_dir():
        metric = {"gold_bpb": "bpb", "gold_nats": "nats", "val_loss": "val_loss"}.get(st.get("loss_metric"), "bpb")
        acc_metric = st.get("acc_metric") or "acc"
        df, source, warnings = load_runs(data, loss_metric=metric, acc_metric=acc_metric, steps="last", tasks=None)
    else:
        cols = parse_columns(columns, ACCURACY_ROLES)
        df, source = load_table(data, cols, optional=("task", "acc"))
        warnings = []
    if not per:  # one sigmoid: every row is its task
        groups = [(None, rec, df)]
    else:
        if "task" not in df.columns:
            if len(per) != 1:
                raise InputError(
                    f"the accuracy fit holds one sigmoid per task ({', '.join(per)}): "
                    "the data needs a task column (--col task=NAME)"
                )
            df = df.assign(task=next(iter(per)))
        df = df.assign(task=df["task"].astype(str))
        unknown = sorted(set(df["task"]) - set(per))
        if unknown:
            warnings.append(f"task(s) without a sigmoid in the fit left out: {', '.join(unknown)}")
        groups = [(t, per[t], g) for t, g in df.groupby("task", sort=False) if t in per]
        if not groups:
            raise InputError(
                f"no task of the data is in the accuracy fit (fit: {', '.join(per)}; data: {', '.join(unknown)})"
            )
    parts, with_draws = [], True
    for _, r, g in groups:
        L = g["loss"].to_numpy(float)
        if not np.all(np.isfinite(L)):
            raise InputError(f"column loss has {int((~np.isfinite(L)).sum())} missing or non-numeric value(s)")
        S = len(((r.get("bootstrap") or {}).get("samples") or {}).get("a") or [])
        with_draws &= S > 1
        n_draws = S * RESIDUAL_DRAWS if S > 1 else 5000
        pred, lo, hi = [], [], []
        for x in L:
            t = through_sigmoid(r, {"point": x, "draws": np.full(n_draws, x), "param_draws": None}, ci, seed)
            iv = t.get("interval") or [np.nan, np.nan]
            pred.append(t["acc"])
            lo.append(iv[0])
            hi.append(iv[1])
        out = _inputs(g, ("loss",))
        measured = g["acc"].to_numpy(float) if "acc" in g.columns else None
        _columns(out, "acc", True, np.asarray(pred), np.asarray(lo, float), np.asarray(hi, float), measured)
        f = _factor({"loss": L}, {"loss": r.get("loss_range")})
        out["extrapolation_factor"] = f if f is not None else np.nan
        parts.append(out)
    frame = pd.concat(parts, ignore_index=True)
    conv = {"loss_metric": st.get("loss_metric"), "acc_metric": st.get("acc_metric"), "source": source}
    return _finish(frame, ["acc"], conv, _interval_kind(with_draws, additive=True), warnings, ci)


# ---------------------------------------------------------------- batch / lr
def _batch_lr(rec, data, columns, ci, rng) -> Prediction:
    import pandas as pd  # deferred: pandas is slow to import

    if not has_exponents(rec):
        why = (rec.get("settings") or {}).get("exponents")
        raise InputError(f"this batch-lr fit holds per-group optima only ({why}): there is no law to predict with")
    st, p = rec.get("settings") or {}, rec["params"]
    form = st.get("form", "compute")
    ds = inputs.load(data, parse_columns(columns, inputs.ROLES), _n_kind(rec))
    df, warnings = ds.df, []
    inputs.validate(ds, ("N", "D"), min_points=1, law=f"predict (batch-lr, {form} form)")
    conv = (rec.get("conventions") or {}).get("compute")
    C = compute_column(df, conv, ds.n_kind) if form == "compute" else _compute(rec, df, ds.n_kind, warnings)
    sweep = all(c in df.columns for c in ("lr", "batch_tokens", "loss"))
    if sweep:  # a batch x lr sweep: each group's optimum is what was measured (as the fit located it)
        if form == "compute":
            groups = group_by_tolerance(C, float(st.get("budget_tol") or 0.05))
        else:
            gn = group_by_tolerance(df["N"].to_numpy(float), 0.01)
            gd = group_by_tolerance(df["D"].to_numpy(float), 0.01)
            _, groups = np.unique(np.stack([gn, gd], 1), axis=0, return_inverse=True)
        lg = lambda c: np.log(df[c].to_numpy(float))  # noqa: E731
        _, rows = select_points(
            lg("N"),
            lg("D"),
            np.log(C),
            lg("lr"),
            lg("batch_tokens"),
            df["loss"].to_numpy(float),
            np.ravel(groups),
            float(st.get("near_optimal_tol", 0.0025)),
            st.get("optimum", "best"),
        )
        pts = pd.DataFrame(
            {
                "N": [r["N"] for r in rows],
                "D": [r["D"] for r in rows],
                "C": [r["C"] for r in rows],
                "n_runs": [r["n_runs"] for r in rows],
            }
        )
        measured = {
            "lr": np.array([r["opt_lr"] for r in rows]),
            "batch_tokens": np.array([r["opt_batch_tokens"] for r in rows]),
        }
        warnings.append(
            f"the data is a batch x lr sweep: each of its {len(rows)} group(s)' optimum "
            f"({st.get('optimum', 'best')}) is compared with the law"
        )
    else:
        pts = pd.DataFrame({"N": df["N"].to_numpy(float), "D": df["D"].to_numpy(float)})
        if C is not None:
            pts["C"] = C
        if "run" in df.columns:
            pts.insert(0, "run", df["run"].to_numpy())
        measured = {q: df[q].to_numpy(float) if q in df.columns else None for q in ("lr", "batch_tokens")}
    x = {
        "N": pts["N"].to_numpy(float),
        "D": pts["D"].to_numpy(float),
        "C": pts["C"].to_numpy(float) if "C" in pts else None,
    }
    if form == "compute":
        keys = ("lr_coef", "lr_exp_C", "bs_coef", "bs_exp_C")
        lr, bt = ComputeHParamLaw(**{k: p[k] for k in keys}).predict(C=x["C"])
        s = _samples(rec, keys)
        draws = ComputeHParamLaw(**s).predict(C=x["C"]) if s else None
    else:
        keys = ("lr_coef", "lr_exp_N", "lr_exp_D", "bs_coef", "bs_exp_D")
        clean = {k: (0.0 if p.get(k) is None and "exp" in k else p.get(k)) for k in keys}
        lr, bt = NDHParamLaw(**clean).predict(N=x["N"], D=x["D"])
        s = _samples(rec, [k for k in keys if p.get(k) is not None])
        if s:
            draws = NDHParamLaw(**{k: s.get(k, np.zeros_like(s["lr_coef"])) for k in keys}).predict(N=x["N"], D=x["D"])
        else:
            draws = None
    out = pts.copy()
    n = len(pts)
    for q, pred, j, rkey in (("lr", lr, 0, "residuals_log_lr"), ("batch_tokens", bt, 1, "residuals_log_batch")):
        pred = np.asarray(pred, dtype=float) * np.ones(n)
        qd = None if draws is None else np.asarray(draws[j], float) * np.ones((1, n))
        lo, hi = _log_intervals(pred, qd, _residuals(rec, rkey), ci, rng)
        _columns(out, q, False, pred, lo, hi, measured[q])
    if not (rec.get("diagnostics") or {}).get("residuals_log_lr"):
        warnings.append(
            "the record keeps no residuals (an older batch-lr record): the interval is the parameters' only"
        )
    ranges = rec.get("data_range") or {}
    f = _factor({k: v for k, v in x.items() if v is not None and (form == "compute") == (k == "C")}, ranges)
    out["extrapolation_factor"] = f if f is not None else np.nan
    conv_out = {"n_kind": ds.n_kind, "n_source": ds.n_source, "compute": conv, "form": form, "source": ds.source}
    kind = _interval_kind(draws is not None)
    return _finish(out.reset_index(drop=True), ["lr", "batch_tokens"], conv_out, kind, warnings, ci)
