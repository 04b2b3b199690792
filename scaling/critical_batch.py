"""Critical batch size from steps-to-target-loss vs batch size (McCandlish et al. 2018).

Per model size: fit S(B) = S_min (1 + B_crit/B) = S_min + E_min / B to the number of steps S a
run with batch B (tokens) needed to reach the target loss, by least squares on log S with
S_min, E_min > 0. Definition used: **B_crit = E_min / S_min** (tokens): the batch at which both
steps and examples are twice their minima. (Zhang et al. 2024 instead report the batch with a
20% step overhead relative to linear scaling; that is a different number.)
Across models: B_crit = bcrit_coef * N^bcrit_exp_N (OLS in log space). When the table has a
`loss` column (the target loss per model) Kaplan's B_crit(L) = B_star / L^(1/alphaB) is fitted too.
"""
from __future__ import annotations

import time

import numpy as np

from scaling import bootstrap as bs
from scaling import inputs
from scaling.common import distinct, group_by_tolerance, ols
from scaling.errors import FitError, InputError
from scaling.record import FitRecord, data_sha256, make_record
from scaling.threads import blas_single_thread


def fit_steps_curve(B: np.ndarray, S: np.ndarray) -> tuple[float, float]:
    """(S_min, E_min) minimising sum (log S - log(S_min + E_min/B))^2 with both positive."""
    from scipy.optimize import least_squares

    x = 1.0 / B
    A = np.column_stack([np.ones_like(x), x])
    c, *_ = np.linalg.lstsq(A, S, rcond=None)
    s0 = c[0] if c[0] > 0 else S.min() / 2
    e0 = c[1] if c[1] > 0 else (S.max() - S.min()) * B.min() + 1.0
    fun = lambda p: np.log(np.exp(p[0]) + np.exp(p[1]) * x) - np.log(S)  # noqa: E731
    res = least_squares(fun, [np.log(s0), np.log(e0)], xtol=1e-14, ftol=1e-14, gtol=1e-14, method="lm")
    return float(np.exp(res.x[0])), float(np.exp(res.x[1]))


def _per_model(N, B, S, groups, min_batches: int = 3):
    rows, notes = [], []
    for g in np.unique(groups):
        m = groups == g
        n = float(np.exp(np.log(N[m]).mean()))
        if distinct(B[m]) < min_batches:
            notes.append(f"model N~{n:.3g}: only {distinct(B[m])} distinct batch sizes (< {min_batches}); skipped")
            continue
        s_min, e_min = fit_steps_curve(B[m], S[m])
        rows.append({"N": n, "S_min": s_min, "E_min": e_min, "B_crit": e_min / s_min, "n_runs": int(m.sum()),
                     "B_range": [float(B[m].min()), float(B[m].max())], "group": int(g)})
    return rows, notes


def _across(rows, losses=None) -> dict[str, float]:
    out = {}
    if len(rows) >= 2:
        (c, e), _ = ols(np.log([r["N"] for r in rows]), np.log([r["B_crit"] for r in rows]))
        out.update(bcrit_coef=float(np.exp(c)), bcrit_exp_N=float(e))
    if losses is not None and len(rows) >= 2:
        Ls = np.array([losses[r["group"]] for r in rows])
        if distinct(Ls, 1e-4) >= 2:
            (c, e), _ = ols(np.log(Ls), np.log([r["B_crit"] for r in rows]))
            if e < 0:
                out.update(B_star=float(np.exp(c)), alphaB=float(-1.0 / e))
    return out


@blas_single_thread
def fit_critical_batch(data, *, bootstrap: int = 0, seed: int = 0, columns=None, n_kind: str = "total", ci: float = 0.95) -> FitRecord:
    """Per-model S_min, E_min, B_crit and the B_crit(N) power law; returns a FitRecord."""
    ds = data if isinstance(data, inputs.Dataset) else inputs.load(data, columns, n_kind)
    inputs.validate(ds, ("N", "batch_tokens", "steps"), min_points=3, law="critical-batch")
    df = ds.df
    warnings = list(ds.warnings)
    t0 = time.perf_counter()
    N, B, S = (df[c].to_numpy(float) for c in ("N", "batch_tokens", "steps"))
    groups = group_by_tolerance(N, 0.01)
    losses = None
    if "loss" in df.columns and np.all(np.isfinite(df["loss"].to_numpy(float))):
        losses = {int(g): float(df["loss"][groups == g].mean()) for g in np.unique(groups)}
    rows, notes = _per_model(N, B, S, groups)
    warnings.extend(notes)
    if not rows:
        raise InputError("critical-batch: no model size has runs at 3 or more batch sizes")
    for r in rows:
        lo, hi = r["B_range"]
        if not lo <= r["B_crit"] <= hi:
            warnings.append(f"model N~{r['N']:.3g}: B_crit={r['B_crit']:.3g} lies outside the tested batch range [{lo:.3g}, {hi:.3g}] (extrapolated)")
    params = _across(rows, losses)
    if len(rows) < 2:
        warnings.append("only one model size: bcrit_coef and bcrit_exp_N are not identified")
    intervals, boot = {}, None
    if bootstrap:
        idxs = bs.resample_indices(len(df), bootstrap, seed, groups=groups)
        per_model_samples: dict[int, list[float]] = {r["group"]: [] for r in rows}

        def one(idx):
            rr, _ = _per_model(N[idx], B[idx], S[idx], groups[idx])
            for r in rr:
                if r["group"] in per_model_samples:
                    per_model_samples[r["group"]].append(r["B_crit"])
            return _across(rr, losses) or None

        t = time.perf_counter()
        samples, failed = bs.run_bootstrap(one, idxs)
        intervals = bs.percentile_intervals(samples, ci)
        for r in rows:
            iv = bs.percentile_intervals({"B_crit": per_model_samples[r["group"]]}, ci)
            if iv:
                r["B_crit_interval"] = iv["B_crit"]
        boot = {"n": bootstrap, "failed": failed, "seed": seed, "ci": ci, "seconds": time.perf_counter() - t, "samples": samples,
                "method": "resample runs within each model size; percentile intervals"}
    if not params and len(rows) >= 2:
        raise FitError("critical-batch: could not fit B_crit(N)")
    rec = make_record(
        law="critical-batch", approach=None, params=params, intervals=intervals, objective=None, n_points=len(df), warnings=warnings,
        data_sha256=data_sha256(df, ["N", "batch_tokens", "steps"]), n_kind=ds.n_kind, source=ds.source, columns=ds.columns,
        models=rows,
        settings={"definition": "B_crit = E_min / S_min from S = S_min (1 + B_crit / B)", "batch_unit": "tokens", "bootstrap": bootstrap, "seed": seed, "ci": ci},
        diagnostics={"n_models": len(rows), "fit_seconds": time.perf_counter() - t0},
    )
    if boot:
        rec["bootstrap"] = boot
    return rec
