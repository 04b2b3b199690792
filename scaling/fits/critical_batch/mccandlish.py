"""One (model size, target loss): McCandlish et al. 2018's S(B) = S_min (1 + B_crit/B) fitted to the steps
each batch size needed (its fastest lr; repeats as their geometric mean), and the record's `models` rows
built from those fits, with the noise scale measured near each target."""

from __future__ import annotations

import numpy as np

from scaling.core.selection import distinct, group_by_tolerance

MIN_BATCHES = 3
IDENTIFIED_FACTOR = 4.0  # B_crit beyond 4x outside the tested batches is an extrapolation: kept out of the laws


def fit_steps_curve(B: np.ndarray, S: np.ndarray) -> tuple[float, float]:
    """(S_min, E_min) minimising sum (log S - log(S_min + E_min/B))^2 with both positive."""
    from scipy.optimize import least_squares  # deferred: scipy.optimize is slow to import

    x = 1.0 / B
    A = np.column_stack([np.ones_like(x), x])
    c, *_ = np.linalg.lstsq(A, S, rcond=None)
    s0 = c[0] if c[0] > 0 else S.min() / 2
    e0 = c[1] if c[1] > 0 else (S.max() - S.min()) * B.min() + 1.0
    fun = lambda p: np.log(np.exp(p[0]) + np.exp(p[1]) * x) - np.log(S)  # noqa: E731
    res = least_squares(fun, [np.log(s0), np.log(e0)], xtol=1e-14, ftol=1e-14, gtol=1e-14, method="lm")
    return float(np.exp(res.x[0])), float(np.exp(res.x[1]))


def _per_batch(B, S, lr) -> list[tuple[float, float, float | None, np.ndarray]]:
    """[(batch, steps, lr, member indices)] per distinct batch: the fastest lr cell, whose
    repeats enter as their geometric mean."""
    out: list[tuple[float, float, float | None, np.ndarray]] = []
    bg = group_by_tolerance(B, 0.01)
    for b in np.unique(bg):
        m = np.flatnonzero(bg == b)
        ok = np.isfinite(lr[m]) & (lr[m] > 0)
        cells = group_by_tolerance(lr[m], 0.01) if ok.all() else np.zeros(m.size, int)
        best: tuple[float, float, float | None, np.ndarray] | None = None
        for c in np.unique(cells):
            mm = m[cells == c]
            s = float(np.exp(np.log(S[mm]).mean()))
            if best is None or s < best[1]:
                best = (float(np.exp(np.log(B[mm]).mean())), s, float(lr[mm[0]]) if ok.all() else None, mm)
        assert best is not None  # every batch has at least one lr cell
        out.append(best)
    return out


def _fit_key(B, S, lr) -> dict | None:
    """The McCandlish fit for one (model, target), or None with fewer than MIN_BATCHES batches."""
    cells = _per_batch(B, S, lr)
    if len(cells) < MIN_BATCHES:
        return None
    bb = np.array([c[0] for c in cells])
    ss = np.array([c[1] for c in cells])
    s_min, e_min = fit_steps_curve(bb, ss)
    bcrit = e_min / s_min
    resid = np.log(ss) - np.log(s_min + e_min / bb)
    lo, hi = float(bb.min()), float(bb.max())
    return {
        "S_min": s_min,
        "E_min": e_min,
        "B_crit": bcrit,
        "B_overhead20": bcrit / 5 + 1.2 * lo,
        "D_at_B_crit": 2 * e_min,
        "B_range": [lo, hi],
        "n_batches": len(cells),
        "rms_log_residual": float(np.sqrt(np.mean(resid**2))),
        "in_laws": bool(lo / IDENTIFIED_FACTOR <= bcrit <= hi * IDENTIFIED_FACTOR),
        "_cells": cells,
    }


def fit_rows(pts: dict, keys: list[tuple[int, float | None]]) -> dict[tuple, dict]:
    out = {}
    for key in keys:
        m = pts["key_model"] == key[0]
        if key[1] is not None:
            m &= np.isclose(pts["target"], key[1], rtol=1e-9, atol=0)
        if m.sum() == 0:
            continue
        r = _fit_key(pts["B"][m], pts["S"][m], pts["lr"][m])
        if r is not None:
            r["_idx"] = np.flatnonzero(m)
            out[key] = r
    return out


def fit_keys(pts: dict, model: np.ndarray) -> list[tuple[int, float | None]]:
    """One (model group, target) key per fit; equal targets (to 1e-6) are made identical."""
    keys: list[tuple[int, float | None]] = []
    for g in np.unique(model):
        m = model == g
        ts = pts["target"][m]
        if np.isnan(ts).all():
            keys.append((int(g), None))
            continue
        tg = group_by_tolerance(ts, 1e-6)
        for k in np.unique(tg):
            t = float(ts[tg == k][0])
            pts["target"][np.flatnonzero(m)[tg == k]] = t
            keys.append((int(g), t))
    return keys


def build_rows(pts: dict, model: np.ndarray, keys, fits: dict, table: list[dict], warnings: list[str]) -> list[dict]:
    """The record's `models` rows (one per fitted (model, target)), with their warnings."""
    rows = []
    for key in keys:
        m = model == key[0]
        n = float(np.exp(np.log(pts["N"][m]).mean()))
        tl = "" if key[1] is None else f" target {key[1]:.4g}"
        if key not in fits:
            m2 = m if key[1] is None else m & (pts["target"] == key[1])
            warnings.append(
                f"model N~{n:.3g}{tl}: only {distinct(pts['B'][m2], 0.01)} "
                f"batch size(s) reach it (< {MIN_BATCHES}); no fit"
            )
            continue
        f = fits[key]
        run_names = sorted({pts["run"][i] for i in f["_idx"]})
        row = {
            "N": n,
            "group": key[0],
            "target_loss": key[1],
            "n_runs": len(run_names),
            "_runs": run_names,
            **{k: v for k, v in f.items() if not k.startswith("_")},
        }
        row["points"] = [
            {"batch_tokens": b, "steps": s, "tokens": b * s, "lr": lr_, "runs": [pts["run"][i] for i in mm]}
            for b, s, lr_, mm in f["_cells"]
        ]
        lo, hi = row["B_range"]
        if not lo <= row["B_crit"] <= hi:
            warnings.append(
                f"model N~{n:.3g}{tl}: B_crit={row['B_crit']:.3g} lies outside "
                f"the tested batch range [{lo:.3g}, {hi:.3g}] (extrapolated)"
                + (
                    ""
                    if row["in_laws"]
                    else f"; more than {IDENTIFIED_FACTOR:g}x outside, so left out of the across-model laws"
                )
            )
        if table:
            _noise_for_row(row, table)
        rows.append(row)
    return rows


def _noise_for_row(row: dict, table: list[dict]) -> None:
    vals = [
        t["grad_noise_scale_near"]
        for t in table
        if t["run"] in row["_runs"]
        and t["target_loss"] == row["target_loss"]
        and t["grad_noise_scale_near"] is not None
    ]
    if vals:
        row.update(
            noise_scale=float(np.median(vals)),
            noise_scale_runs=len(vals),
            noise_scale_range=[float(min(vals)), float(max(vals))],
        )
    else:
        row.update(
            noise_scale=None,
            noise_scale_runs=0,
            noise_scale_note="not measured (no grad_noise_scale records near "
            "the target; set train.noise_scale_every_steps)",
        )
