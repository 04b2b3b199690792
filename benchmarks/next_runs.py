"""Benchmark: does `scalelab study next` (scaling.planning.next_runs) buy interval width and accuracy
at a target budget with fewer FLOPs than the usual next sweep?

synthetic: a known Chinchilla law (scaling.synthetic.runs.TRUE_CHINCHILLA, log-normal noise) and a
small starting IsoFLOP sweep (budgets 1e17, 3e17, 1e18; 9 sizes each). The target is 100x the largest
starting budget (1e20). Each round spends what one more IsoFLOP profile of the ladder would
(budgets 2e18, 4e18, ... doubling; 9 sizes from N_opt/8 to 8 N_opt around the TRUE optimum: the
baseline is favoured), either on that profile ("isoflop") or on the runs `study next` proposes from a
grid of (N, D) with the same total FLOPs and at most 9 runs ("design"); the runs' losses are drawn
from the truth, the law refitted with a bootstrap (with --design-steps K the design instead makes K calls
per rung with 1/K of its FLOPs each, refitting after each), and the width of N_opt's interval at the target
(log of hi/lo) and of the loss at the optimum measured, with their errors against the truth.
Printed: per seed and round, FLOPs spent and widths; then the FLOPs each rule needed to bring N_opt's
interval under the stated span (interpolated in log FLOPs), median over seeds, and their ratio.

epoch: Epoch's bundled Chinchilla runs (240 points). Fit on the runs below 1e20 FLOPs; the test set is
the largest runs (C >= 2.5e21); the candidates are the rest. With the same FLOP budget, pick runs by
`study next --candidates` (one batch), by whole IsoFLOP profiles in ascending compute (compute-matched
IsoFLOP), and at random (several seeds); refit on the start plus the picks and report the mean
absolute relative error of the predicted loss at the test runs.

    .venv/bin/python benchmarks/next_runs.py synthetic [--seeds 4] [--rounds 5] [--bootstrap 50] [--plot F] [--json F]
    .venv/bin/python benchmarks/next_runs.py epoch [--budget 3e21] [--random 5] [--bootstrap 100]
    .venv/bin/python benchmarks/next_runs.py calibration [--seeds 6] [--budget 1.8e19] [--bootstrap 50] [--draws 8]

calibration: is the forecast printed after the proposed runs right? Per seed, the same starting sweep
and truth as `synthetic`; `study next` proposes up to 9 runs within --budget for the target 1e20 and
forecasts the widths of N_opt's and the loss's intervals there by the Fisher update and by the refit
(scaling.planning.forecast); then the runs are drawn from the truth, the law refitted with the same
bootstrap, and the realised widths measured. Printed: realised / forecast width ratio per seed and
their geometric mean and spread over seeds, for each forecast (1.0: calibrated; > 1: overconfident).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from scaling.core.bootstrap import interval  # noqa: E402
from scaling.fits.chinchilla.approaches import fit_chinchilla  # noqa: E402
from scaling.laws.loss import ChinchillaLaw  # noqa: E402
from scaling.planning.next_runs import SCREENS, TARGETS, propose  # noqa: E402
from scaling.synthetic.runs import TRUE_CHINCHILLA, TRUE_DATA_CONSTRAINED, chinchilla_table  # noqa: E402

START_BUDGETS = (1e17, 3e17, 1e18)
SIZES = 9


def widths_dc(rec, C: float, truth, unique: float) -> dict:
    """widths() for a data-constrained law: the optimum at C when every run draws from `unique` tokens."""
    from functools import partial

    from scaling.core.conventions import TokenCost
    from scaling.laws.allocation import allocate
    from scaling.laws.loss import DataConstrainedLaw

    keys = ("E", "A", "B", "alpha", "beta", "R_D_star")
    s = {k: np.asarray(rec["bootstrap"]["samples"][k], dtype=float) for k in keys}
    cost, rng = TokenCost("6ND_total", "total"), (1e5, 1e13)
    with np.errstate(all="ignore"):
        n_s, d_s = allocate(
            partial(DataConstrainedLaw(**{k: v[:, None] for k, v in s.items()}).predict, U=unique), C, cost, rng
        )
        l_s = DataConstrainedLaw(**s).predict(n_s, d_s, U=unique)
        law = rec.law()
        n, d = (float(v) for v in allocate(partial(law.predict, U=unique), C, cost, rng))
        tn, td = (float(v) for v in allocate(partial(truth.predict, U=unique), C, cost, rng))
    ni, li = interval(n_s, 0.95), interval(l_s, 0.95)
    return {
        "N_width": float(np.log(ni[1] / ni[0])) if ni else float("inf"),
        "loss_width": float(li[1] - li[0]) if li else float("inf"),
        "N_opt": n,
        "N_error": n / tn - 1,
        "loss_error": float(law.predict(n, d, U=unique) / truth.predict(tn, td, U=unique) - 1),
        "no_optimum": float(np.mean(~np.isfinite(n_s))),
    }


def widths(rec, C: float, truth: ChinchillaLaw | None = None) -> dict:
    """log(hi/lo) of N_opt's interval at C, hi - lo of the loss at the optimum, and their errors."""
    s = {k: np.asarray(rec["bootstrap"]["samples"][k], dtype=float) for k in ("E", "A", "B", "alpha", "beta")}
    draws = ChinchillaLaw(**s)
    with np.errstate(all="ignore"):
        n_s, d_s = draws.compute_optimal(C)
        l_s = draws.predict(n_s, d_s)
    ni, li = interval(n_s, 0.95), interval(l_s, 0.95)
    law = rec.law()
    n, d = law.compute_optimal(C)
    out = {"N_width": float(np.log(ni[1] / ni[0])), "loss_width": float(li[1] - li[0]), "N_opt": float(n)}
    if truth is not None:
        tn, td = truth.compute_optimal(C)
        out["N_error"] = float(n / tn - 1)
        out["loss_error"] = float(law.predict(n, d) / truth.predict(tn, td) - 1)
    return out


def draw(truth, N, D, noise, rng, unique=None) -> pd.DataFrame:
    """Runs drawn from the truth; with `unique`, every run draws from that many unique tokens (U = min(D, unique))."""
    N, D = np.asarray(N, float), np.asarray(D, float)
    if unique is None:
        loss = truth.predict(N, D) * np.exp(noise * rng.standard_normal(N.size))
        return pd.DataFrame({"N": N, "D": D, "flops": 6 * N * D, "loss": loss})
    U = np.minimum(D, unique)
    loss = truth.predict(N, D, U=U) * np.exp(noise * rng.standard_normal(N.size))
    return pd.DataFrame({"N": N, "D": D, "U": U, "flops": 6 * N * D, "loss": loss})


def grid_candidates(budget: float) -> list[dict]:
    out = []
    for n in np.geomspace(1e6, 3e10, 30):
        for r in np.geomspace(1.0, 1000.0, 19):
            if 6 * n * r * n <= budget:
                out.append({"N": float(n), "D": float(r * n)})
    return out


def _fit(df, args, seed):
    if args.law == "data-constrained":
        return fit_chinchilla(df, law="data-constrained", terms="data", bootstrap=args.bootstrap, top_k=8, seed=seed)
    return fit_chinchilla(df, bootstrap=args.bootstrap, top_k=8, seed=seed)


def synthetic(args) -> dict:
    if args.replot:  # redraw the figure from a --json of an earlier run
        d = json.loads(Path(args.replot).read_text())
        _plot(d["curves"], args.plot, 100 * START_BUDGETS[-1])
        return d
    if args.combine:  # the summary over the seeds of several runs (each its own --first-seed)
        parts = [json.loads(Path(f).read_text())["curves"] for f in args.combine]
        return summarise(
            {k: [c for p in parts for c in p[k]] for k in ("isoflop", "design")}, args, 100 * START_BUDGETS[-1]
        )
    if args.design_steps < 1:
        raise SystemExit(f"--design-steps must be >= 1 (got {args.design_steps})")
    dc = args.law == "data-constrained"
    truth, C = (TRUE_DATA_CONSTRAINED if dc else TRUE_CHINCHILLA), 100 * START_BUDGETS[-1]
    U = args.unique if dc else None

    def measure(rec):
        return widths_dc(rec, C, truth, U) if dc else widths(rec, C, truth)

    ladder = [START_BUDGETS[-1] * 2 ** (k + 1) for k in range(args.rounds)]
    curves: dict[str, list] = {"isoflop": [], "design": []}
    reused = json.loads(Path(args.isoflop_from).read_text())["curves"]["isoflop"] if args.isoflop_from else None
    if reused is not None and (len(reused) != args.seeds or any(len(c) != args.rounds + 1 for c in reused)):
        raise SystemExit(f"--isoflop-from {args.isoflop_from}: not {args.seeds} seed(s) of {args.rounds} rounds")
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        start = chinchilla_table(truth, budgets=START_BUDGETS, n_per_budget=SIZES, noise=args.noise, seed=seed)
        if dc:  # the same design, every run drawing from the corpus's `unique` tokens
            start = draw(truth, start.N, start.D, args.noise, np.random.default_rng(seed), U)
        start_flops = float(start.flops.sum())
        for rule in curves:
            if rule == "isoflop" and reused is not None:
                curves[rule].append(reused[seed - args.first_seed])
                continue
            rng = np.random.default_rng(1000 + seed)
            df, spent, rows = start.copy(), 0.0, []
            rec = _fit(df, args, seed)
            rows.append({"spent": 0.0, **measure(rec)})
            # the design may spend each rung's FLOPs in --design-steps sequential calls of study next
            parts = 1 if rule == "isoflop" else args.design_steps
            for b in (b for b in ladder for _ in range(parts)):
                if rule == "isoflop":
                    n_opt, _ = truth.compute_optimal(b)
                    N = n_opt * np.geomspace(1 / 8, 8, SIZES)
                    new = draw(truth, N, b / (6 * N), args.noise, rng, U)
                else:
                    p = propose(
                        [rec],
                        C,
                        budget=SIZES * b / parts,
                        max_runs=SIZES,
                        candidates=grid_candidates(SIZES * b / parts),
                        unique_tokens=U,
                        # the design's choice only (the calibration run checks its forecast); the refit screen's futures
                        forecast_draws=args.screen_draws if args.screen == "refit" else 0,
                        target_of=args.target,
                        screen=args.screen,
                        runs=df,
                        forecast_resamples=args.screen_resamples,
                        max_epochs=args.max_epochs,
                    )
                    if args.screen == "refit":
                        print(f"  {next(n for n in p.notes if n.startswith('screen:'))}", flush=True)
                    new = draw(truth, [r["N"] for r in p.rows], [r["D"] for r in p.rows], args.noise, rng, U)
                spent += float(new.flops.sum())
                df = pd.concat([df, new], ignore_index=True)
                rec = _fit(df, args, seed)
                rows.append({"spent": spent, **measure(rec)})
                print(
                    f"seed {seed} {rule:8s} spent {spent:9.3g} ({spent / start_flops:6.3g}x the start) "
                    f"N_opt width x{np.exp(rows[-1]['N_width']):6.3f}  loss width {rows[-1]['loss_width']:.4f}  "
                    f"N_opt error {rows[-1]['N_error']:+.3f}  loss error {rows[-1]['loss_error']:+.4f}",
                    flush=True,
                )
            curves[rule].append(rows)
    return summarise(curves, args, C)


def summarise(curves: dict, args, C: float) -> dict:
    """FLOPs each rule needs to bring N_opt's interval under --target-span, per seed and median."""
    span = args.target_span
    n_seeds = len(curves["design"])
    need = {rule: [_flops_to_reach(rows, np.log(span)) for rows in runs] for rule, runs in curves.items()}
    med = {k: float(np.nanmedian(v)) if np.isfinite(v).any() else float("nan") for k, v in need.items()}
    print(f"\nFLOPs to bring N_opt's 95% interval at {C:.3g} FLOPs under {span:g}x (median over {n_seeds} seeds):")
    for k, v in need.items():
        print(f"  {k:8s} " + ", ".join(f"{x:.3g}" for x in v) + f"  median {med[k]:.3g}")
    print(f"  design / isoflop: {med['design'] / med['isoflop']:.3g}")
    if args.plot:
        _plot(curves, args.plot, C)
    return {"curves": curves, "flops_to_span": need, "median": med, "target_span": span}


def _flops_to_reach(rows: list[dict], log_span: float) -> float:
    """First FLOPs at which N_opt's width is <= log_span, interpolated in log FLOPs; nan if never."""
    for a, b in zip(rows, rows[1:]):
        if b["N_width"] <= log_span:
            if a["N_width"] <= log_span:
                return a["spent"] or b["spent"]
            if a["spent"] <= 0:
                return b["spent"]
            t = (a["N_width"] - log_span) / (a["N_width"] - b["N_width"])
            return float(np.exp(np.log(a["spent"]) + t * (np.log(b["spent"]) - np.log(a["spent"]))))
    return float("nan")


def _plot(curves, path, C):
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for rule, color in (("isoflop", "#6b7280"), ("design", "#2563eb")):
        for i, rows in enumerate(curves[rule]):
            x = [r["spent"] for r in rows[1:]]
            axes[0].plot(
                x,
                [np.exp(r["N_width"]) for r in rows[1:]],
                "o-",
                color=color,
                alpha=0.7,
                label=rule if i == 0 else None,
            )
            axes[1].plot(
                x, [r["loss_width"] for r in rows[1:]], "o-", color=color, alpha=0.7, label=rule if i == 0 else None
            )
    axes[0].set(
        xscale="log",
        yscale="log",
        xlabel="FLOPs spent after the starting sweep",
        ylabel="N_opt 95% interval hi/lo",
        title=f"N_opt at {C:.0e} FLOPs",
    )
    axes[1].set(
        xscale="log",
        yscale="log",
        xlabel="FLOPs spent after the starting sweep",
        ylabel="loss 95% interval width",
        title=f"loss at the optimum at {C:.0e} FLOPs",
    )
    for a in axes:
        a.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ticks = [2e19, 5e19, 1e20, 2e20, 5e20]
        a.set_xticks(ticks, [f"{t:.0e}".replace("+", "") for t in ticks])
        a.legend()
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def epoch(args) -> dict:
    from scaling.core.selection import group_by_tolerance
    from scaling.data.datasets import load_epoch_chinchilla

    df = load_epoch_chinchilla(5).reset_index(drop=True)
    C = df.flops.to_numpy()
    start, test = df[C < 1e20], df[C >= args.test_from]
    menu = df[(C >= 1e20) & (C < args.test_from)].reset_index(drop=True)
    print(
        f"start {len(start)} runs (< 1e20 FLOPs), menu {len(menu)} runs ({menu.flops.sum():.3g} FLOPs), "
        f"test {len(test)} runs (>= {args.test_from:.3g}); budget {args.budget:.3g} FLOPs"
    )
    rec0 = fit_chinchilla(start, bootstrap=args.bootstrap, top_k=8, seed=0)
    target = float(test.flops.median())
    scored = ("mean_abs_rel_error", "N_span", "loss_width")

    def score(picks: pd.DataFrame) -> dict:
        rec = fit_chinchilla(pd.concat([start, picks], ignore_index=True), top_k=8, bootstrap=args.score_bootstrap)
        pred = rec.law().predict(test.N.to_numpy(), test.D.to_numpy())
        rel = pred / test.loss.to_numpy() - 1
        w = widths(rec, target)
        return {
            "runs": len(picks),
            "flops": float(picks.flops.sum()),
            "mean_abs_rel_error": float(np.mean(np.abs(rel))),
            "mean_rel_error": float(np.mean(rel)),
            "N_span": float(np.exp(w["N_width"])),
            "loss_width": w["loss_width"],
        }

    out = {"start_only": score(menu.iloc[:0])}
    t0 = time.perf_counter()
    cands = [{"N": float(n), "D": float(d), "row": i} for i, (n, d) in enumerate(zip(menu.N, menu.D))]
    p = propose(
        [rec0],
        target,
        budget=args.budget,
        max_runs=args.max_runs,
        candidates=cands,
        runs=start,
        forecast_draws=args.draws,
    )
    out["design"] = score(menu.iloc[[r["row"] for r in p.rows]])
    out["design"]["seconds"] = time.perf_counter() - t0
    f = p.after["forecast"]
    out["forecast"] = {
        "fisher": f["width_ratio_fisher"],
        "refit": f.get("width_ratio_refit"),
        "realised": {  # the design's refit against the start's, both with --score-bootstrap resamples
            "N_opt": float(np.log(out["design"]["N_span"]) / np.log(out["start_only"]["N_span"])),
            "loss": out["design"]["loss_width"] / out["start_only"]["loss_width"],
        },
        "seconds": f.get("seconds"),
    }
    groups = group_by_tolerance(menu.flops.to_numpy(), 0.15)
    order = sorted(set(groups), key=lambda g: menu.flops[groups == g].median())
    chosen, spent = [], 0.0
    for g in order:  # whole IsoFLOP profiles, ascending, while the budget lasts
        cost = float(menu.flops[groups == g].sum())
        if spent + cost > args.budget:
            break
        chosen += list(np.flatnonzero(groups == g))
        spent += cost
    out["isoflop"] = score(menu.iloc[chosen])
    rnd = []
    for s in range(args.random):
        rng = np.random.default_rng(s)
        picks, spent = [], 0.0
        for i in rng.permutation(len(menu)):
            if spent + menu.flops[i] <= args.budget:
                picks.append(i)
                spent += float(menu.flops[i])
        rnd.append(score(menu.iloc[picks]))
    out["random"] = {
        "seeds": rnd,
        **{k: float(np.mean([r[k] for r in rnd])) for k in scored},
        "flops": float(np.mean([r["flops"] for r in rnd])),
        "runs": float(np.mean([r["runs"] for r in rnd])),
    }
    out["all_menu"] = score(menu)
    print(f"target of the design: {target:.3g} FLOPs (the test runs' median compute)")
    fc = out["forecast"]
    for k in ("N_opt", "loss"):
        print(
            f"  {k} width after the design's picks: realised x{fc['realised'][k]:.3f}, forecast x{fc['fisher'][k]:.3f} "
            f"(Fisher), x{(fc['refit'] or {}).get(k, float('nan')):.3f} (refit)"
        )
    for k in ("start_only", "design", "isoflop", "random", "all_menu"):
        v = out[k]
        print(
            f"  {k:10s} runs {v['runs']:6.3g}  FLOPs {v['flops']:9.3g}  mean |rel error| at the test runs "
            f"{v['mean_abs_rel_error']:.4f}  at {target:.3g}: N_opt interval hi/lo {v['N_span']:.3g}, "
            f"loss interval width {v['loss_width']:.4f}"
        )
    return out


def calibration(args) -> dict:
    truth, C = TRUE_CHINCHILLA, 100 * START_BUDGETS[-1]
    rows = []
    for seed in range(args.seeds):
        start = chinchilla_table(truth, budgets=START_BUDGETS, n_per_budget=SIZES, noise=args.noise, seed=seed)
        rec = fit_chinchilla(start, bootstrap=args.bootstrap, top_k=8, seed=seed)
        w0 = widths(rec, C, truth)
        p = propose(
            [rec],
            C,
            budget=args.budget,
            max_runs=SIZES,
            candidates=grid_candidates(args.budget),
            runs=start,
            forecast_draws=args.draws,
        )
        f = p.after["forecast"]
        new = draw(
            truth, [r["N"] for r in p.rows], [r["D"] for r in p.rows], args.noise, np.random.default_rng(500 + seed)
        )
        rec1 = fit_chinchilla(pd.concat([start, new], ignore_index=True), bootstrap=args.bootstrap, top_k=8, seed=seed)
        w1 = widths(rec1, C, truth)
        row = {"seed": seed, "runs": len(p.rows), "flops": p.spent, "forecast_seconds": f.get("seconds")}
        for k, wk in (("N_opt", "N_width"), ("loss", "loss_width")):
            real = w1[wk] / w0[wk]
            row[k] = {
                "today": w0[wk],
                "realised_ratio": real,
                "fisher_ratio": f["width_ratio_fisher"][k],
                "refit_ratio": f["width_ratio_refit"][k],
            }
        rows.append(row)
        print(
            f"seed {seed}: {row['runs']} runs, {row['flops']:.3g} FLOPs, forecast {row['forecast_seconds']:.0f} s; "
            + "  ".join(
                f"{k} width x{row[k]['realised_ratio']:.3f} realised, x{row[k]['fisher_ratio']:.3f} Fisher, "
                f"x{row[k]['refit_ratio']:.3f} refit"
                for k in ("N_opt", "loss")
            ),
            flush=True,
        )
    summary = {}
    print(f"\nrealised / forecast width ratio over {args.seeds} seeds (geometric mean [min, max]; 1 = calibrated):")
    for k in ("N_opt", "loss"):
        for m in ("fisher", "refit"):
            q = np.array([r[k]["realised_ratio"] / r[k][f"{m}_ratio"] for r in rows])
            summary[f"{k}_{m}"] = {
                "gmean": float(np.exp(np.mean(np.log(q)))),
                "min": float(q.min()),
                "max": float(q.max()),
            }
            s = summary[f"{k}_{m}"]
            print(f"  {k:6s} {m:6s} {s['gmean']:.3g} [{s['min']:.3g}, {s['max']:.3g}]")
    return {"rows": rows, "summary": summary}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("synthetic")
    s.add_argument("--seeds", type=int, default=4)
    s.add_argument("--rounds", type=int, default=5)
    s.add_argument("--bootstrap", type=int, default=50)
    s.add_argument("--noise", type=float, default=0.01, help="sd of the log-loss noise per run")
    s.add_argument("--target-span", type=float, default=1.5, help="N_opt interval hi/lo to reach")
    s.add_argument("--plot")
    s.add_argument(
        "--law",
        choices=("chinchilla", "data-constrained"),
        default="chinchilla",
        help="the truth: Chinchilla, or Muennighoff et al.'s data-constrained law with --unique tokens",
    )
    s.add_argument("--unique", type=float, default=3e9, help="data-constrained: the corpus's unique tokens")
    s.add_argument("--replot", metavar="JSON", help="only redraw --plot from the --json of an earlier run")
    s.add_argument("--first-seed", type=int, default=0, help="seeds first-seed ... first-seed + seeds - 1")
    s.add_argument(
        "--target",
        choices=tuple(TARGETS),
        default="both",
        help="the design's --target (study next): which intervals its runs should shrink",
    )
    s.add_argument(
        "--screen",
        choices=SCREENS,
        default="fisher",
        help="the design's --screen (study next): the Fisher greedy's picks, or the best of a few batches by refits",
    )
    s.add_argument(
        "--screen-resamples", type=int, default=20, help="--screen refit: bootstrap resamples per simulated future"
    )
    s.add_argument("--screen-draws", type=int, default=4, help="--screen refit: simulated futures per batch")
    s.add_argument("--max-epochs", type=float, help="the design's --max-epochs (study next; default 4)")
    s.add_argument(
        "--design-steps",
        type=int,
        default=1,
        help="the design calls study next this many times per ladder rung, each with 1/steps of its FLOPs",
    )
    s.add_argument(
        "--isoflop-from",
        metavar="JSON",
        help="reuse the isoflop curves of an earlier --json with the same seeds, --bootstrap, --rounds and truth "
        "(they do not depend on the design's options) instead of refitting them",
    )
    s.add_argument(
        "--combine", nargs="+", metavar="JSON", help="only summarise the --json of earlier runs (e.g. one per seed)"
    )
    e = sub.add_parser("epoch")
    e.add_argument("--budget", type=float, default=3e21)
    e.add_argument("--test-from", type=float, default=2.5e21)
    e.add_argument("--max-runs", type=int, default=20)
    e.add_argument("--random", type=int, default=5)
    e.add_argument("--bootstrap", type=int, default=100)
    e.add_argument("--score-bootstrap", type=int, default=50, help="bootstrap of each refit, for the widths")
    e.add_argument("--draws", type=int, default=8, help="--forecast-draws of the design's refit forecast")
    c = sub.add_parser("calibration")
    c.add_argument("--seeds", type=int, default=6)
    c.add_argument("--budget", type=float, default=1.8e19, help="FLOPs of the proposed runs (default: one ladder step)")
    c.add_argument("--bootstrap", type=int, default=50)
    c.add_argument("--draws", type=int, default=8, help="--forecast-draws of the refit forecast")
    c.add_argument("--noise", type=float, default=0.01)
    for p in (s, e, c):
        p.add_argument("--json")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = {"synthetic": synthetic, "epoch": epoch, "calibration": calibration}[args.what](args)
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
