"""`scalelab predict` of a batch/LR record (the batch-lr family's `predict`): the optimal lr and batch in tokens
at new points, by the record's form (compute: of C; nd: of N and D), with prediction intervals from its
bootstrap draws and the residuals of each quantity. A batch x lr sweep as DATA is read as the fit read it:
each group's optimum is what was measured.
"""

from __future__ import annotations

import numpy as np

from scaling.core.conventions import compute_column
from scaling.core.errors import InputError
from scaling.core.selection import group_by_tolerance
from scaling.data import inputs
from scaling.data.columns import parse_columns
from scaling.fits.batch_lr import select_points
from scaling.fits.prediction import (
    Prediction,
    add_columns,
    compute_for,
    extrapolation,
    finish,
    interval_kind,
    log_intervals,
    n_kind,
    residuals,
    samples,
)
from scaling.fits.record import has_exponents
from scaling.laws.hparams import ComputeHParamLaw, NDHParamLaw


def predict_batch_lr_rows(rec, data, columns: list[str] | None, ci: float, seed: int) -> Prediction:
    """The optimal lr and batch (tokens) at DATA's points; a batch x lr sweep's measured optima beside them."""
    import pandas as pd  # deferred: pandas is slow to import

    rng = np.random.default_rng(seed)
    if not has_exponents(rec):
        why = (rec.get("settings") or {}).get("exponents")
        raise InputError(f"this batch-lr fit holds per-group optima only ({why}): there is no law to predict with")
    st, p = rec.get("settings") or {}, rec["params"]
    form = st.get("form", "compute")
    ds = inputs.load(data, parse_columns(columns, inputs.ROLES), n_kind(rec))
    df = ds.df
    warnings: list[str] = []
    inputs.validate(ds, ("N", "D"), min_points=1, law=f"predict (batch-lr, {form} form)")
    conv = (rec.get("conventions") or {}).get("compute")
    if form == "compute" and not conv:
        raise InputError("this batch-lr record states no compute convention (conventions.compute): refit it")
    C = compute_column(df, str(conv), ds.n_kind) if form == "compute" else compute_for(rec, df, ds.n_kind, warnings)
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
        measured: dict[str, np.ndarray | None] = {
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
    x: dict[str, np.ndarray | None] = {
        "N": pts["N"].to_numpy(float),
        "D": pts["D"].to_numpy(float),
        "C": pts["C"].to_numpy(float) if "C" in pts else None,
    }
    if form == "compute":
        keys: tuple[str, ...] = ("lr_coef", "lr_exp_C", "bs_coef", "bs_exp_C")
        lr, bt = ComputeHParamLaw(**{k: p[k] for k in keys}).predict(C=x["C"])
        s = samples(rec, keys)
        draws = ComputeHParamLaw(**s).predict(C=x["C"]) if s else None
    else:
        keys = ("lr_coef", "lr_exp_N", "lr_exp_D", "bs_coef", "bs_exp_D")
        clean = {k: (0.0 if p.get(k) is None and "exp" in k else p.get(k)) for k in keys}
        lr, bt = NDHParamLaw(**clean).predict(N=x["N"], D=x["D"])
        s = samples(rec, [k for k in keys if p.get(k) is not None])
        if s:
            draws = NDHParamLaw(**{k: s.get(k, np.zeros_like(s["lr_coef"])) for k in keys}).predict(N=x["N"], D=x["D"])
        else:
            draws = None
    out = pts.copy()
    n = len(pts)
    for q, pred, j, rkey in (("lr", lr, 0, "residuals_log_lr"), ("batch_tokens", bt, 1, "residuals_log_batch")):
        pred = np.asarray(pred, dtype=float) * np.ones(n)
        qd = None if draws is None else np.asarray(draws[j], float) * np.ones((1, n))
        lo, hi = log_intervals(pred, qd, residuals(rec, rkey), ci, rng)
        add_columns(out, q, False, pred, lo, hi, measured[q])
    if not (rec.get("diagnostics") or {}).get("residuals_log_lr"):
        warnings.append(
            "the record keeps no residuals (an older batch-lr record): the interval is the parameters' only"
        )
    ranges = rec.get("data_range") or {}
    f = extrapolation({k: v for k, v in x.items() if v is not None and (form == "compute") == (k == "C")}, ranges)
    out["extrapolation_factor"] = f if f is not None else np.nan
    conv_out = {"n_kind": ds.n_kind, "n_source": ds.n_source, "compute": conv, "form": form, "source": ds.source}
    kind = interval_kind(draws is not None)
    return finish(out.reset_index(drop=True), ["lr", "batch_tokens"], conv_out, kind, warnings, ci)
