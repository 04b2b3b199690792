"""Benchmark: Chinchilla Approach 3 on Epoch's 240 points -- fit time, bootstrap time, objective,
against a plain reference implementation of the paper's 4,500-start grid.

Reference ("plain"): scipy L-BFGS-B from every grid point with scipy's default tolerances and
finite-difference gradients (how the fit is usually written). It is timed on a random subset of
starts and extrapolated to 4,500 (or timed fully with --reference-full). The machine is shared:
wall and CPU times and the load average are printed; compare ratios measured in the same run.

    .venv/bin/python benchmarks/fit_speed.py [--bootstrap 200] [--subset 60] [--full-grid] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--subset", type=int, default=60, help="grid starts timed for the plain reference")
    ap.add_argument("--reference-full", action="store_true", help="time the plain reference on all 4500 starts (slow)")
    ap.add_argument("--full-grid", action="store_true", help="also time scalelab's --grid full (all 4500 starts, analytic gradients)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)

    import numpy as np
    from scipy.optimize import minimize

    from scaling import fit_chinchilla
    from scaling.chinchilla_fit import BOUNDS, THETA, Objective, paper_grid
    from scaling.datasets import load_epoch_chinchilla
    from scaling.threads import single_threaded_blas

    df = load_epoch_chinchilla(drop_highest_k=5)
    res: dict = {"n_points": len(df), "loadavg_start": os.getloadavg(), "cpus": os.cpu_count()}
    print(f"Epoch data: {len(df)} points; load average {res['loadavg_start'][0]:.2f} on {res['cpus']} CPUs (shared machine)")

    rec, w, c = timed(lambda: fit_chinchilla(df))
    res.update(fit_wall_s=w, fit_cpu_s=c, objective=rec["objective"], params=rec.params, starts_run=rec["diagnostics"]["starts_run"])
    print(f"fast fit (top-32 of 4500 grid, analytic grad): {w:.2f} s wall, {c:.2f} s CPU, objective {rec['objective']:.10f} (target <= 0.0010182740)")

    if args.bootstrap:
        rb, w, c = timed(lambda: fit_chinchilla(df, bootstrap=args.bootstrap, seed=args.seed))
        res.update(bootstrap_n=args.bootstrap, bootstrap_wall_s=rb["bootstrap"]["seconds"], bootstrap_total_wall_s=w, bootstrap_cpu_s=c, intervals=rb.intervals)
        print(f"bootstrap {args.bootstrap}: {rb['bootstrap']['seconds']:.1f} s wall (fit + bootstrap {w:.1f} s wall, {c:.1f} s CPU)")
        for k in ("E", "alpha", "beta", "a"):
            lo, hi = rb.intervals[k]
            print(f"   {k:>5}: [{lo:.4f}, {hi:.4f}]")

    obj = Objective(df.N, df.D, df.loss)
    grid = paper_grid()
    bounds = [BOUNDS[k] for k in THETA]
    rng = np.random.default_rng(args.seed)
    idx = np.arange(len(grid)) if args.reference_full else rng.choice(len(grid), size=min(args.subset, len(grid)), replace=False)
    plain = lambda th: obj(th)[0]  # noqa: E731  objective only: scipy differentiates numerically

    def run_plain():
        best = np.inf
        for i in idx:
            best = min(best, minimize(plain, grid[i], method="L-BFGS-B", bounds=bounds).fun)
        return best

    with single_threaded_blas():
        best_plain, w, c = timed(run_plain)
    scale = len(grid) / len(idx)
    res.update(reference_starts_timed=len(idx), reference_wall_s_est=w * scale, reference_cpu_s_est=c * scale, reference_best_objective_on_subset=best_plain)
    print(f"plain reference (default tol, numeric grad): {len(idx)} starts in {w:.2f} s wall -> {w * scale:.1f} s for 4500 "
          f"({c * scale:.1f} s CPU); best objective on these starts {best_plain:.10f}")
    if args.full_grid:
        rf, w, c = timed(lambda: fit_chinchilla(df, grid="full"))
        res.update(full_grid_wall_s=w, full_grid_cpu_s=c, full_grid_objective=rf["objective"])
        print(f"scalelab --grid full (4500 starts, analytic grad, tight tol): {w:.1f} s wall, {c:.1f} s CPU, objective {rf['objective']:.10f}")
    res["speedup_fit_vs_reference_wall"] = res["reference_wall_s_est"] / res["fit_wall_s"]
    res["speedup_fit_vs_reference_cpu"] = res["reference_cpu_s_est"] / res["fit_cpu_s"]
    res["objective_gap_vs_reference"] = res["objective"] - best_plain
    res["loadavg_end"] = os.getloadavg()
    print(f"ratios: reference/fast fit = {res['speedup_fit_vs_reference_wall']:.0f}x wall, {res['speedup_fit_vs_reference_cpu']:.0f}x CPU; "
          f"objective(fast) - objective(reference subset) = {res['objective_gap_vs_reference']:.3e}")
    if args.bootstrap:
        print(f"targets: fit <= 10 s: {'OK' if res['fit_wall_s'] <= 10 else 'MISSED'} ; bootstrap {args.bootstrap} <= 60 s: "
              f"{'OK' if res['bootstrap_wall_s'] <= 60 else 'MISSED'} (load average at end {res['loadavg_end'][0]:.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
