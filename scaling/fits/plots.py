"""Diagnostic plots for fit records (matplotlib, Agg backend: works headless).

chinchilla: loss vs N per D band, IsoFLOP profiles with fitted minima, compute-optimal frontier
with bootstrap band, log-residuals. kaplan: data vs fit. batch-lr: optimal lr and batch vs
compute (or D). critical-batch: steps to target vs batch per (model, target), B_crit vs N and D.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scaling.core.bootstrap import interval
from scaling.core.conventions import compute_C
from scaling.core.selection import drop_highest, group_by_tolerance
from scaling.fits.record import has_exponents
from scaling.laws.hparams import StepsExamplesLaw
from scaling.laws.loss import ChinchillaLaw
from scaling.laws.registry import from_record


def _plt():
    import matplotlib  # deferred: matplotlib is slow to import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: matplotlib is slow to import

    return plt


def plot_fit(rec, df, path) -> Path:
    """Write the plot for `rec` (fitted on canonical table `df`) to `path`; returns the path."""
    fn = {"chinchilla": _chinchilla, "kaplan": _kaplan, "batch-lr": _batch_lr, "critical-batch": _critical}[rec["law"]]

    k = (rec.get("settings") or {}).get("drop_highest") or 0
    if k and len(df) > k:  # show the points that were fitted
        df = drop_highest(df, k)
    plt = _plt()
    fig = fn(plt, rec, df)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def _chinchilla(plt, rec, df):
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5))
    N, D, L = df["N"].to_numpy(float), df["D"].to_numpy(float), df["loss"].to_numpy(float)
    C = compute_C(df)
    law = from_record(rec)
    ax = axes[0, 0]
    sc = ax.scatter(N, L, c=np.log10(D), s=14, cmap="viridis")
    fig.colorbar(sc, ax=ax, label="log10 D (tokens)")
    if isinstance(law, ChinchillaLaw):
        ns = np.geomspace(N.min(), N.max(), 100)
        for d in np.quantile(D, [0.1, 0.5, 0.9]):
            ax.plot(ns, law.predict(ns, d), lw=1, label=f"fit, D={d:.2g}")
        ax.legend(fontsize=7)
    ax.set(xscale="log", xlabel="N (parameters)", ylabel="loss", title="loss vs N (colour: D)")

    ax = axes[0, 1]
    groups = group_by_tolerance(C, rec.get("settings", {}).get("budget_tol") or 0.15)
    cmap = plt.get_cmap("plasma")
    big = [g for g in np.unique(groups) if (groups == g).sum() >= 3]
    for i, g in enumerate(big):
        m = groups == g
        col = cmap(i / max(1, len(big) - 1))
        ax.scatter(N[m], L[m], s=10, color=col)
        if isinstance(law, ChinchillaLaw):
            c = float(np.exp(np.log(C[m]).mean()))
            ns = np.geomspace(N[m].min() / 2, N[m].max() * 2, 60)
            ax.plot(ns, law.predict(ns, c / (6 * ns)), color=col, lw=0.8)
    for b in (rec.get("diagnostics") or {}).get("budgets", []):
        ax.plot(b["N_opt"], b["loss_opt"], "k*", ms=8)
    if isinstance(law, ChinchillaLaw):
        cs = np.geomspace(C.min(), C.max(), 30)
        n_opt, d_opt = law.compute_optimal(cs)
        ax.plot(n_opt, law.predict(n_opt, d_opt), "k--", lw=1, label="fitted optimum")
        ax.legend(fontsize=7)
    ax.set(xscale="log", xlabel="N", ylabel="loss", title="IsoFLOP profiles (stars: parabola minima)")

    ax = axes[1, 0]
    cs = np.geomspace(C.min(), C.max() * 100, 60)
    n_opt, d_opt = law.compute_optimal(cs)
    ax.plot(cs, n_opt, label="N_opt")
    ax.plot(cs, d_opt, label="D_opt")
    s = (rec.get("bootstrap") or {}).get("samples") or {}
    if isinstance(law, ChinchillaLaw) and all(k in s for k in ("E", "A", "B", "alpha", "beta")):
        bl = ChinchillaLaw(**{k: np.asarray(s[k], float)[:, None] for k in ("E", "A", "B", "alpha", "beta")})
        with np.errstate(all="ignore"):
            nb, db = bl.compute_optimal(cs[None, :])
        for arr in (nb, db):
            ax.fill_between(cs, *interval(arr, (rec.get("bootstrap") or {}).get("ci") or 0.95, axis=0), alpha=0.25)
    pts = (rec.get("diagnostics") or {}).get("budgets") or (rec.get("diagnostics") or {}).get("envelope") or []
    if pts:
        ax.scatter([p["C"] for p in pts], [p["N_opt"] for p in pts], s=12, color="C0")
        ax.scatter([p["C"] for p in pts], [p["D_opt"] for p in pts], s=12, color="C1")
    ax.axvline(C.max(), color="grey", ls=":", lw=1)
    p = rec["params"]
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="C (FLOPs)",
        title=f"compute-optimal frontier: a={p.get('a', float('nan')):.3f}, b={p.get('b', float('nan')):.3f}",
    )
    ax.legend(fontsize=7)

    ax = axes[1, 1]
    if isinstance(law, ChinchillaLaw):
        extra = (
            {"U": df["U"].to_numpy(float)} if "U" in df.columns and hasattr(law, "effective_data") else {}
        )  # data-constrained
        r = np.log(law.predict(N, D, **extra)) - np.log(L)
        ax.scatter(C, r, s=10, c=np.log10(N), cmap="viridis")
        ax.axhline(0, color="k", lw=0.8)
        ax.set(xscale="log", xlabel="C (FLOPs)", ylabel="log pred - log obs", title="residuals (colour: log10 N)")
    else:
        ax.text(
            0.5,
            0.5,
            f"approach {rec.get('approach')}: no loss model\n(residuals need approach 3)",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
    fig.suptitle(f"Chinchilla approach {rec.get('approach')}  ({rec['n_points']} points)")
    fig.tight_layout()
    return fig


def _kaplan(plt, rec, df):
    law = from_record(rec)
    form = rec["settings"]["form"]
    fig, ax = plt.subplots(1, 1, figsize=(6, 4.5))
    L = df["loss"].to_numpy(float)
    if form == "d":
        x = df["D"].to_numpy(float)
        xs = np.geomspace(x.min(), x.max(), 100)
        ax.scatter(x, L, s=12)
        ax.plot(xs, law.predict(D=xs), "k-")
        ax.set_xlabel("D (tokens)")
    else:
        x = df["N"].to_numpy(float)
        ax.scatter(x, L, s=12, c=np.log10(df["D"].to_numpy(float)) if form == "nd" else None)
        xs = np.geomspace(x.min(), x.max(), 100)
        if form == "n":
            ax.plot(xs, law.predict(N=xs), "k-")
        else:
            for d in np.quantile(df["D"].to_numpy(float), [0.1, 0.5, 0.9]):
                ax.plot(xs, law.predict(N=xs, D=d), lw=1, label=f"D={d:.2g}")
            ax.legend(fontsize=7)
        ax.set_xlabel("N (parameters)")
    ax.set(xscale="log", yscale="log", ylabel="loss", title=f"Kaplan fit ({form})")
    fig.tight_layout()
    return fig


def _batch_lr(plt, rec, df):
    form = rec["settings"]["form"]
    rows = rec["diagnostics"]["groups"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    xkey = "C" if form == "compute" else "D"
    x = np.array([r[xkey] for r in rows])
    xs = np.geomspace(x.min(), x.max() * 10, 50)
    lr_fit = bs_fit = None
    if has_exponents(rec):  # fewer than 3 groups: the optima alone
        law = from_record(rec)
        if form == "compute":
            lr_fit, bs_fit = law.predict(C=xs)
        else:
            n_mid = float(np.exp(np.log(df["N"].to_numpy(float)).mean()))
            lr_fit, bs_fit = law.predict(N=n_mid, D=xs)
    for ax, key, fit, name in (
        (axes[0], "opt_lr", lr_fit, "lr"),
        (axes[1], "opt_batch_tokens", bs_fit, "batch (tokens)"),
    ):
        ax.scatter(x, [r[key] for r in rows], color="k", s=16, label="group optimum")
        if fit is not None:
            ax.plot(xs, fit, "C3-", label="fitted law")
        ax.set(xscale="log", yscale="log", xlabel=xkey, ylabel=f"optimal {name}")
        ax.legend(fontsize=7)
    ax = axes[2]
    sc = ax.scatter(df["lr"], df["batch_tokens"], c=df["loss"], s=14, cmap="viridis_r")
    fig.colorbar(sc, ax=ax, label="loss")
    ax.set(xscale="log", yscale="log", xlabel="lr", ylabel="batch (tokens)", title="sweep (all groups)")
    fig.suptitle(f"batch/lr law, form {form}")
    fig.tight_layout()
    return fig


def _critical(plt, rec, df):
    """Steps to target vs batch per (model, target) with the fitted curves; B_crit vs N (each
    model's lowest target) and vs D = 2 E_min (every fit), with the measured noise scale."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    rows = rec["models"]
    groups = sorted({m.get("group", i) for i, m in enumerate(rows)})
    ax = axes[0]
    for i, m in enumerate(rows):
        colour = f"C{groups.index(m.get('group', i)) % 10}"
        if m.get("points"):
            B = np.array([p["batch_tokens"] for p in m["points"]])
            S = np.array([p["steps"] for p in m["points"]])
        else:  # records written before per-fit points were stored: the table's rows
            sel = np.abs(np.log(df["N"].to_numpy(float)) - np.log(m["N"])) < 0.01
            B, S = df["batch_tokens"].to_numpy(float)[sel], df["steps"].to_numpy(float)[sel]
        t = m.get("target_loss")
        ax.scatter(B, S, s=14, color=colour, label=f"N={m['N']:.2g}" + (f", L={t:.3g}" if t is not None else ""))
        bs = np.geomspace(B.min() / 2, B.max() * 2, 60)
        ax.plot(bs, StepsExamplesLaw(m["S_min"], m["E_min"]).steps(bs), color=colour, lw=1)
        ax.axvline(m["B_crit"], color=colour, ls=":", lw=0.8)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="batch (tokens)",
        ylabel="steps to target",
        title="S = S_min (1 + B_crit/B); dotted: B_crit",
    )
    ax.legend(fontsize=6)
    p = rec["params"]
    for ax, key, coef, exp, xlabel in (
        (axes[1], "N", "bcrit_coef", "bcrit_exp_N", "N"),
        (axes[2], "D_at_B_crit", "bcrit_coef_D", "bcrit_exp_D", "D = 2 E_min (tokens)"),
    ):
        sel = [m for m in rows if key in m and (key != "N" or m.get("primary", True))]
        if not sel:
            continue
        xs = np.array([m[key] for m in sel])
        ax.scatter(xs, [m["B_crit"] for m in sel], color="k", label="fitted B_crit")
        ns = [(m[key], m["noise_scale"]) for m in sel if m.get("noise_scale")]
        if ns:
            ax.scatter(*zip(*ns), facecolors="none", edgecolors="C1", label="measured noise scale (B_simple)")
        if coef in p:
            grid = np.geomspace(xs.min() / 2, xs.max() * 4, 40)
            ax.plot(
                grid, p[coef] * grid ** p[exp], "C3-", label=f"B_crit = {p[coef]:.3g} {key.split('_')[0]}^{p[exp]:.3f}"
            )
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="B_crit (tokens)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
