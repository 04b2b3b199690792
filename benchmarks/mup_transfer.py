"""μP transfer, shown: an lr sweep at several widths at fixed tokens, under sp and under mup, and the
optimal lr of each width from a parabola fitted to the held-out loss in log lr.

    python benchmarks/mup_transfer.py [--widths 32,64,128,256] [--lrs 1e-3,2e-3,...] [--steps 120]
        [--base-width 32] [--jobs 4] [--png docs/figures/mup_transfer.png] [--json PATH]

Each run: a 2-layer, 4-head GPT (benchmarks/mup_train.py) on the bundled corpus (BPE 512, 32-token
sequences, 8 per step, the same batches for every run), AdamW without weight decay, cosine
schedule with 10% warmup, clipping 1.0; the loss is the mean over fixed held-out batches. The
optimum: a parabola through the best grid lr and its two neighbours in log2(lr) (its vertex,
clamped to them); at a grid edge, the edge, marked `edge`. Prints the loss table, the optima and
their spread across widths (largest / smallest optimal lr) per parametrization; under mup the
spread should stay below 2, under sp it is larger. `--jobs` processes of one thread each share the
runs out, widest first (on a busy machine one thread per process is
several times faster than torch's default threads).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from scaling.fits.lr_choice import choose_lr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mup_train import corpus, model_config, train  # noqa: E402

SEQ_LEN, BATCH, VOCAB, VAL_BATCHES = 32, 8, 512, 16
LRS = "2e-3,4e-3,8e-3,1.6e-2,3.2e-2,6.4e-2,1.28e-1"


def val_loss(model, val) -> float:
    model.eval()
    with torch.no_grad():
        losses = [model(*val.batch(i * BATCH, BATCH), logits=False).loss.item() for i in range(VAL_BATCHES)]
    return float(np.mean(losses))


def optimum(lrs: list[float], losses: list[float]) -> tuple[float, bool]:
    """(optimal lr, interior?): the best finite point, or, when it has finite neighbours on both sides,
    the vertex of the parabola in log lr through the three (scaling.fits.lr_choice, as the main job)."""
    y = np.array([v if math.isfinite(v) else np.inf for v in losses])
    i = int(np.argmin(y))
    if i == 0 or i == len(lrs) - 1 or not np.isfinite(y[i - 1 : i + 2]).all():
        return lrs[i], False
    return choose_lr(lrs[i - 1 : i + 2], list(y[i - 1 : i + 2]))["lr"], True


_DATA: tuple = ()  # (train sampler, val sampler, vocab): set before the workers fork


def one_run(job: tuple) -> tuple[str, int, float, float]:
    """One (parametrization, width, lr): its held-out loss (inf if it diverged)."""
    par, w, lr, steps, base_width = job
    torch.set_num_threads(1)
    train_s, val, vocab = _DATA
    batches = lambda step: train_s.batch(step * BATCH, BATCH)  # noqa: E731
    t0 = time.perf_counter()
    cfg = model_config(w, par, base_width, vocab, SEQ_LEN)
    model, losses = train(cfg, batches, steps, lr, schedule="cosine", warmup=max(1, steps // 10))
    v = val_loss(model, val) if math.isfinite(losses[-1]) else math.inf
    print(f"{par} width {w} lr {lr:g}: val loss {v:.4f} ({time.perf_counter() - t0:.1f}s)", file=sys.stderr, flush=True)
    return par, w, lr, v


def sweep(widths, lrs, steps, base_width, data, jobs: int = 1) -> dict:
    """{par: {width: {losses (one per lr), best_lr, interior}}}; runs shared out over `jobs` processes."""
    global _DATA
    _DATA = data
    todo = [
        (par, w, lr, steps, base_width) for w in sorted(widths, reverse=True) for lr in lrs for par in ("sp", "mup")
    ]
    if jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(jobs) as pool:
            done = pool.map(one_run, todo, chunksize=1)
    else:
        done = [one_run(j) for j in todo]
    loss = {(par, w, lr): v for par, w, lr, v in done}
    out: dict = {}
    for par in ("sp", "mup"):
        out[par] = {}
        for w in widths:
            row = [loss[par, w, lr] for lr in lrs]
            best, interior = optimum(lrs, row)
            out[par][w] = {"losses": row, "best_lr": best, "interior": interior}
    return out


def render(widths, lrs, res) -> str:
    lines = []
    for par, rows in res.items():
        lines.append(f"{par}: held-out loss by lr (rows: width)")
        lines.append(f"{'width':>6}" + "".join(f"{lr:>9.2g}" for lr in lrs) + f"{'best lr':>11}")
        for w in widths:
            r = rows[w]
            cells = "".join(f"{v:>9.4f}" if math.isfinite(v) else f"{'div':>9}" for v in r["losses"])
            lines.append(f"{w:>6}" + cells + f"{r['best_lr']:>11.3g}" + ("" if r["interior"] else " edge"))
        best = [rows[w]["best_lr"] for w in widths]
        lines.append(f"spread of the optimal lr across widths: {max(best) / min(best):.2f}x")
        lines.append("")
    return "\n".join(lines)


def plot(widths, lrs, res, path: Path) -> None:
    import matplotlib  # deferred: heavy, only for the figure

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, (par, rows) in zip(axes, res.items()):
        for w in widths:
            r = rows[w]
            y = [v if math.isfinite(v) else np.nan for v in r["losses"]]
            (line,) = ax.plot(lrs, y, marker="o", label=f"width {w}")
            ax.axvline(r["best_lr"], color=line.get_color(), ls=":", lw=1)
        ax.set(xscale="log", xlabel="peak lr", title=f"{par}: held-out loss after a fixed number of tokens")
    axes[0].set_ylabel("held-out loss")
    lo = min(v for rows in res.values() for r in rows.values() for v in r["losses"] if math.isfinite(v))
    axes[0].set_ylim(lo - 0.05, lo + 1.0)
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--widths", default="32,64,128,256")
    p.add_argument("--lrs", default=LRS)
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--base-width", type=int, default=32)
    p.add_argument("--jobs", type=int, default=4, help="worker processes (one thread each)")
    p.add_argument("--png", default="docs/figures/mup_transfer.png")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    widths = [int(w) for w in args.widths.split(",")]
    lrs = sorted(float(x) for x in args.lrs.split(","))
    if any(w % 8 for w in widths):
        p.error(f"--widths: every width must be a multiple of 8 (4 heads, even head dim); got {args.widths}")
    if len(lrs) < 3:
        p.error(f"--lrs: at least 3 learning rates are needed to fit a parabola; got {args.lrs}")
    t0 = time.perf_counter()
    if args.jobs < 1:
        p.error(f"--jobs: at least 1; got {args.jobs}")
    res = sweep(widths, lrs, args.steps, args.base_width, corpus(VOCAB, SEQ_LEN), args.jobs)
    print(render(widths, lrs, res))
    runs, took = len(widths) * len(lrs) * 2, time.perf_counter() - t0
    print(f"{runs} runs of {args.steps} steps x {BATCH * SEQ_LEN} tokens in {took:.0f}s (data preparation included)")
    if args.png:
        plot(widths, lrs, res, Path(args.png))
        print(f"plot: {args.png}")
    if args.json:
        Path(args.json).write_text(json.dumps({"widths": widths, "lrs": lrs, "steps": args.steps, "results": res}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
