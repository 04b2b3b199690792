"""Diagnostic plots for fit records (matplotlib, Agg backend: works headless).

chinchilla: loss vs N per D band, IsoFLOP profiles with fitted minima, compute-optimal frontier
with bootstrap band, log-residuals. kaplan: data vs fit. batch-lr: optimal lr and batch vs
compute (or D). critical-batch: steps vs batch per model, B_crit vs N.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_fit(rec, df, path) -> Path:
    """Write the plot for `rec` (fitted on canonical table `df`) to `path`; returns the path."""
    fn = {"chinchilla": _chinchilla, "kaplan": _kaplan, "batch-lr": _batch_lr, "critical-batch": _critical}[rec["law"]]
    from scaling.common import drop_highest

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
    from scaling.common import compute_C, group_by_tolerance
    from scaling.laws import ChinchillaLaw, from_record

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
            ax.fill_between(cs, np.nanpercentile(arr, 2.5, axis=0), np.nanpercentile(arr, 97.5, axis=0), alpha=0.25)
    pts = (rec.get("diagnostics") or {}).get("budgets") or (rec.get("diagnostics") or {}).get("envelope") or []
    if pts:
        ax.scatter([p["C"] for p in pts], [p["N_opt"] for p in pts], s=12, color="C0")
        ax.scatter([p["C"] for p in pts], [p["D_opt"] for p in pts], s=12, color="C1")
    ax.axvline(C.max(), color="grey", ls=":", lw=1)
    p = rec["params"]
    ax.set(xscale="log", yscale="log", xlabel="C (FLOPs)", title=f"compute-optimal frontier: a={p.get('a', float('nan')):.3f}, b={p.get('b', float('nan')):.3f}")
    ax.legend(fontsize=7)

    ax = axes[1, 1]
    if isinstance(law, ChinchillaLaw):
        extra = {"U": df["U"].to_numpy(float)} if "U" in df.columns and hasattr(law, "effective_data") else {}  # data-constrained
        r = np.log(law.predict(N, D, **extra)) - np.log(L)
        ax.scatter(C, r, s=10, c=np.log10(N), cmap="viridis")
        ax.axhline(0, color="k", lw=0.8)
        ax.set(xscale="log", xlabel="C (FLOPs)", ylabel="log pred - log obs", title="residuals (colour: log10 N)")
    else:
        ax.text(0.5, 0.5, f"approach {rec.get('approach')}: no loss model\n(residuals need approach 3)", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    fig.suptitle(f"Chinchilla approach {rec.get('approach')}  ({rec['n_points']} points)")
    fig.tight_layout()
    return fig


def _kaplan(plt, rec, df):
    from scaling.laws import from_record

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
    from scaling.common import compute_C
    from scaling.laws import from_record

    law = from_record(rec)
    form = rec["settings"]["form"]
    rows = rec["diagnostics"]["groups"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    C = compute_C(df)
    xkey = "C" if form == "compute" else "D"
    x = np.array([r[xkey] for r in rows])
    xs = np.geomspace(x.min(), x.max() * 10, 50)
    if form == "compute":
        lr_fit, bs_fit = law.predict(C=xs)
    else:
        n_mid = float(np.exp(np.log(df["N"].to_numpy(float)).mean()))
        lr_fit, bs_fit = law.predict(N=n_mid, D=xs)
    for ax, key, fit, name in ((axes[0], "opt_lr", lr_fit, "lr"), (axes[1], "opt_batch_tokens", bs_fit, "batch (tokens)")):
        ax.scatter(x, [r[key] for r in rows], color="k", s=16, label="group optimum")
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
    from scaling.laws import StepsExamplesLaw

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    N, B, S = (df[c].to_numpy(float) for c in ("N", "batch_tokens", "steps"))
    ax = axes[0]
    for i, m in enumerate(rec["models"]):
        sel = np.abs(np.log(N) - np.log(m["N"])) < 0.01
        ax.scatter(B[sel], S[sel], s=14, color=f"C{i % 10}", label=f"N={m['N']:.2g}")
        bs = np.geomspace(B[sel].min() / 2, B[sel].max() * 2, 60)
        ax.plot(bs, StepsExamplesLaw(m["S_min"], m["E_min"]).steps(bs), color=f"C{i % 10}", lw=1)
        ax.axvline(m["B_crit"], color=f"C{i % 10}", ls=":", lw=0.8)
    ax.set(xscale="log", yscale="log", xlabel="batch (tokens)", ylabel="steps to target", title="S = S_min (1 + B_crit/B); dotted: B_crit")
    ax.legend(fontsize=7)
    ax = axes[1]
    ns = np.array([m["N"] for m in rec["models"]])
    ax.scatter(ns, [m["B_crit"] for m in rec["models"]], color="k")
    p = rec["params"]
    if "bcrit_coef" in p:
        xs = np.geomspace(ns.min(), ns.max() * 10, 40)
        ax.plot(xs, p["bcrit_coef"] * xs ** p["bcrit_exp_N"], "C3-", label=f"B_crit = {p['bcrit_coef']:.3g} N^{p['bcrit_exp_N']:.3f}")
        ax.legend(fontsize=7)
    ax.set(xscale="log", yscale="log", xlabel="N", ylabel="B_crit (tokens)")
    fig.tight_layout()
    return fig
