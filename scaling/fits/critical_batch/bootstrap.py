"""The critical-batch bootstrap: whole runs resampled within each model size, the targets fixed; each
(model, target) B_crit and each law's parameters get a percentile interval when enough resamples vary."""

from __future__ import annotations

import numpy as np

from scaling.core import bootstrap as bs
from scaling.core.errors import FitError
from scaling.fits import pipeline
from scaling.fits.critical_batch.laws import across
from scaling.fits.critical_batch.mccandlish import MIN_BATCHES, fit_rows

MIN_BOOT = 10  # successful resamples needed before an interval is reported


def _informative(vals) -> bool:
    v = np.asarray(vals, dtype=float)
    v = v[np.isfinite(v)]
    return v.size >= MIN_BOOT and float(np.ptp(v)) > 1e-12 * float(np.abs(v).max())


def bootstrap_runs(pts, model, keys, rows, params, n_boot: int, seed: int, ci: float, warnings: list[str]):
    """Resample runs (whole runs, never points of a curve) within each model size; targets stay
    fixed. A resample that loses a law the full data supports is a counted, explained failure;
    any other exception is a bug and fails the fit."""
    runs = np.unique(pts["ridx"])
    run_model = np.array([model[np.flatnonzero(pts["ridx"] == r)[0]] for r in runs])
    by_run = {int(r): np.flatnonzero(pts["ridx"] == r) for r in runs}
    per_row: dict[tuple, list[float]] = {(r["group"], r["target_loss"]): [] for r in rows}
    want = set(params)

    def one(idx):
        sel = np.concatenate([by_run[int(runs[i])] for i in idx])
        sub = {k: (v[sel] if isinstance(v, np.ndarray) else [v[i] for i in sel]) for k, v in pts.items()}
        fits = fit_rows(sub, keys)
        rr = []
        for key, f in fits.items():
            if key in per_row:
                per_row[key].append(f["B_crit"])
            n = float(np.exp(np.log(sub["N"][f["_idx"]]).mean()))
            rr.append({"N": n, "group": key[0], "target_loss": key[1], **f})
        p, _ = across(rr)
        lost = sorted(want - set(p))
        if lost:
            raise FitError(
                f"resample left {len(fits)} of {len(rows)} (model, target) fits "
                f"with {MIN_BATCHES}+ batch sizes: too few for {', '.join(lost)}"
            )
        return p

    b = pipeline.bootstrap(one, bs.resample_indices(len(runs), n_boot, seed, groups=run_model), seed=seed, ci=ci)
    samples = b.samples
    intervals = {k: v for k, v in b.intervals().items() if _informative(samples[k])}
    for r in rows:
        vals = per_row[(r["group"], r["target_loss"])]
        r["B_crit_bootstrap_n"] = len(vals)
        if _informative(vals):
            r["B_crit_interval"] = pipeline.interval(vals, ci)
    if any(not _informative(v) for v in list(per_row.values()) + list(samples.values())) or len(samples) < len(want):
        warnings.append(
            f"bootstrap: some quantities have no interval (fewer than {MIN_BOOT} successful resamples, or all alike: "
            "with one run per batch size, resampling runs mostly drops "
            "batch sizes; repeat runs or more batch sizes give intervals)"
        )
    boot = b.record(
        method="resample runs within each model size (targets fixed); percentile intervals; "
        f"a (model, target) fit is skipped in a resample keeping fewer than {MIN_BATCHES} batch sizes",
        reasons_key="failed_reasons",
        standard_errors=False,
    )
    return intervals, boot
