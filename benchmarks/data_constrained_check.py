"""Measurement of the data-constrained law on tiny models: which law predicts the largest runs of a
repeated-data study best -- Muennighoff et al.'s complete law, its data term alone, or plain Chinchilla?

    python benchmarks/data_constrained_check.py            # 27 runs (~15-25 min on the shared 2 cores), then the fits
    python benchmarks/data_constrained_check.py --bootstrap 50

End to end through the CLI: `scalelab data prepare` (configs/data/dc-tiny.yaml, then dc-tiny-u5 and
dc-tiny-u50 with its tokenizer: the first 5 and 50 documents of the same books, one validation set),
`scalelab sweep launch configs/sweeps/data-constrained-tiny.yaml` (3 models x 3 token counts x 3
unique-token budgets), then the runs as one table (N = non-embedding parameters, as the main job
counts them; U = each run's unique training tokens), the largest-compute runs held out (the top
compute group, one run per unique-token budget), `scalelab fit chinchilla` three ways on the rest
(--law chinchilla; --law data-constrained --terms data; --law data-constrained) and `scalelab
predict` of each fit on the held-out runs. Prints each law's held-out errors, interval coverage and
parameters. Everything lands in --work (default out/data_constrained_check); finished runs are reused.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# the repository's own package, from any working directory
from scaling.core.selection import holdout_by_compute  # noqa: E402
from scaling.data.inputs import load as load_runs  # noqa: E402
from scaling.fits.record import FitRecord  # noqa: E402

SCALELAB = [sys.executable, "-m", "launch.cli"]
SPEC = ROOT / "configs/sweeps/data-constrained-tiny.yaml"
LAWS = {
    "chinchilla": ["--law", "chinchilla"],
    "data term only": ["--law", "data-constrained", "--terms", "data"],
    "complete (data + params)": ["--law", "data-constrained", "--terms", "data+params"],
}


def sh(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    r = subprocess.run(SCALELAB + [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        cmd = " ".join(map(str, args))
        sys.exit(f"scalelab {cmd} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return r


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def runs_table(work: Path):
    """The finished runs as one table (N non-embedding, U unique tokens, C = 6 N D) and the reader's notes."""
    ds = load_runs(work / "runs" / SPEC.stem, n_kind="non_embedding")
    df = ds.df
    df["C"] = 6.0 * df["N"] * df["D"]  # 6ND_nonembed, the fits' convention for non-embedding N
    return df, ds.warnings


def overfitting_budgets(df) -> list[float]:
    """Unique-token budgets at which some model's validation loss rises with more tokens: repetition
    has turned into overfitting, which none of the three laws can express (each falls with D)."""
    out = []
    for u, g in df.groupby("U"):
        for _, m in g.groupby("N"):
            loss = m.sort_values("D")["loss"].to_numpy(float)
            if (loss[1:] > loss[:-1]).any():
                out.append(float(u))
                break
    return out


def analyse(work: Path, name: str, df, bootstrap: int) -> None:
    """Hold out the largest compute group, fit the three laws on the rest, predict the held-out runs."""
    train, held, _, _, rule = holdout_by_compute(df, df["C"].to_numpy(float), 0.1)
    cols = ["run", "N", "D", "U", "loss", "flops", "params", "non_embedding_params", "epochs"]
    train_csv, held_csv = work / f"train-{name}.csv", work / f"held-{name}.csv"
    train[cols].to_csv(train_csv, index=False)
    held[cols].to_csv(held_csv, index=False)
    print(f"\n=== {name}: {len(train)} runs fitted; held out {rule}")
    results = {}
    for label, law in LAWS.items():
        fit = work / f"fit-{name}-{law[1]}{'-' + law[3] if len(law) > 2 else ''}.json"
        t = time.perf_counter()
        sh(["fit", "chinchilla", train_csv, *law, "--bootstrap", bootstrap, "--out", fit], work)
        secs = time.perf_counter() - t
        pred = json.loads(sh(["predict", fit, held_csv, "--json"], work).stdout)
        results[label] = (FitRecord.load(fit), pred, secs)
    for r in results["complete (data + params)"][1]["rows"]:
        epochs = r["D"] / min(r["U"], r["D"])
        print(
            f"held out: {r['run']} (N {r['N']:.3g}, D {r['D']:.3g}, U {r['U']:.3g}, {epochs:.3g} epochs, "
            f"val loss {r['measured']:.4f})"
        )
    for label, (rec, pred, secs) in results.items():
        s = pred["summary"]["loss"]
        p = rec["params"]
        print(
            f"\n{label}: fitted on {rec['n_points']} runs in {secs:.0f} s; held-out mean |rel err| "
            f"{s['mean_abs_rel_error']:.2%}, max {s['max_abs_rel_error']:.2%}, "
            f"coverage {s.get('n_inside', 0)}/{s['n_measured']}"
        )
        names = ("E", "A", "B", "alpha", "beta", "R_D_star", "R_N_star")
        print("    " + ", ".join(f"{k} = {p[k]:.4g}" for k in names if k in p))
        for r in pred["rows"]:
            print(
                f"    {r['run']}: predicted {r['predicted']:.4f} [{r['loss_lo']:.4f}, {r['loss_hi']:.4f}], "
                f"measured {r['measured']:.4f} ({r['rel_error']:+.2%})"
            )
        for w in rec["warnings"]:
            print(f"    warning: {w}")
    err = {k: v[1]["summary"]["loss"]["mean_abs_rel_error"] for k, v in results.items()}
    best = sorted(err, key=err.get)
    tied = [k for k in best if err[k] - err[best[0]] < 1e-4]  # within 0.01 percentage points: no winner between them
    print(f"\n{name}: lowest held-out mean |rel err|: {' and '.join(tied)}" + (" (tied)" if len(tied) > 1 else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--work", default=str(ROOT / "out" / "data_constrained_check"), help="data, runs, tables and fits go here"
    )
    ap.add_argument("--bootstrap", type=int, default=100, help="bootstrap resamples of each fit (prediction intervals)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for name in ("dc-tiny", "dc-tiny-u5", "dc-tiny-u50"):  # dc-tiny first: the others use its tokenizer
        print(sh(["data", "prepare", name], work).stdout.splitlines()[0])
    t = time.perf_counter()
    sh(
        ["sweep", "launch", SPEC, "--executor", "local", "--workers", args.workers, "--allow-repeats"], work
    )  # repeats on purpose
    print(f"sweep: {time.perf_counter() - t:.0f} s (27 runs; finished runs reused); load {load()}")
    df, notes = runs_table(work)
    for n in notes:
        print(f"note: {n}")
    print(df.sort_values(["U", "N", "D"])[["run", "N", "D", "U", "epochs", "loss"]].to_string(index=False))
    analyse(work, "all", df, args.bootstrap)
    over = overfitting_budgets(df)
    if over:
        budgets = ", ".join(f"{u:.3g}" for u in over)
        print(
            f"\nunique-token budget(s) {budgets}: a model's validation loss rises with more tokens there "
            "(overfitting, outside every law's form); the same comparison without them:"
        )
        analyse(work, "in-regime", df[~df["U"].isin(over)].reset_index(drop=True), args.bootstrap)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; load {load()}")


if __name__ == "__main__":
    main()
