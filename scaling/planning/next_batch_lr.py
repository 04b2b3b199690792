"""`scalelab study next --law batch-lr`: the compute groups (and the lr x batch grid in each) that would
identify a batch/LR law (DeepSeek's compute form, log lr_opt and log B_opt linear in log C) at a
target budget.

Each group's optimum is one observation of the two lines at its compute, located to about a grid
step: σ = log(GRID_STEP) / √12 in log lr (a uniform error over one step). The existing groups are the
information today (plus a weak prior, PRIOR_SD in intercept and slope, so that one or two groups
still give a finite covariance); a candidate group at C adds the Fisher information of the row
(1, log C); the targets are log lr_opt and log B_opt at the target (the same gradient (1, log C*),
so one design serves both). `scaling.planning.information.greedy` picks the groups, each costing
its grid's runs times C, at least enough for MIN_GROUPS in all, no two within MIN_SEPARATION of
compute of each other or of an existing group (they would be one group twice: Elfving's design puts
replicates at the ends of the range, and a replicate is better spent as a second seed than as a
near-copy whose model and grid barely differ). The grid is centred on the law's
prediction at that compute when it has exponents, else on the line through the existing optima
(the nearest group's optimum with one group).
"""

from __future__ import annotations

import numpy as np

from scaling.core.errors import InputError
from scaling.fits.batch_lr import MIN_GROUPS
from scaling.planning.information import greedy

GRID_STEP = 2.0
LR_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
BATCH_FACTORS = (0.5, 1.0, 2.0)
PRIOR_SD = 10.0
CANDIDATES = 16
MIN_SEPARATION = 1.5  # a group within this factor of compute of another (existing or chosen) is not a new group


def _optima(rec) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rows = (rec.get("diagnostics") or {}).get("groups") or []
    rows = [r for r in rows if r.get("C") and r.get("opt_lr") and r.get("opt_batch_tokens")]
    if not rows:
        raise InputError("study next --law batch-lr: the record has no group optima (diagnostics.groups)")
    C = np.array([r["C"] for r in rows], float)
    lr = np.array([r["opt_lr"] for r in rows], float)
    bt = np.array([r["opt_batch_tokens"] for r in rows], float)
    tpp = np.array([r["D"] / r["N"] for r in rows if r.get("N") and r.get("D")], float)
    return C, lr, bt, tpp


def _line(C, y, at):
    """log y at `at` from the line through (log C, log y) (the nearest point's value with one C)."""
    x, ly = np.log(C), np.log(y)
    if np.unique(x).size < 2:
        return float(np.exp(ly[np.argmin(np.abs(x - np.log(at)))]))
    b, a = np.polyfit(x, ly, 1)
    return float(np.exp(a + b * np.log(at)))


def propose_batch_lr(rec, target: float, *, budget: float, max_groups: int = 4) -> dict:
    """The groups to add (C, N, D, the lr and batch grid) within `budget` FLOPs, and the forecast
    widths of log lr_opt and log B_opt at `target` relative to today's (with the prior)."""
    if rec.get("law") != "batch-lr" or (rec.get("settings") or {}).get("form", "compute") != "compute":
        raise InputError("study next --law batch-lr takes a `scalelab fit batch-lr` record of the compute form")
    C, lr, bt, tpp = _optima(rec)
    runs = len(LR_FACTORS) * len(BATCH_FACTORS)
    sigma = float(np.log(GRID_STEP) / np.sqrt(12.0))
    J = np.eye(2) / PRIOR_SD**2 + sum(np.outer([1.0, x], [1.0, x]) for x in np.log(C)) / sigma**2
    cov0 = np.linalg.inv(J)
    lo = C.min() / 10.0
    hi = budget / runs
    if hi <= lo:
        raise InputError(
            f"--budget-flops {budget:.3g} buys no group: a group is {runs} runs (lr x batch grid) at one compute"
        )
    cand = np.geomspace(lo, hi, CANDIDATES)
    cand = cand[np.min(np.abs(np.log(cand)[:, None] - np.log(C)[None, :]), axis=1) > np.log(MIN_SEPARATION)]
    close = np.abs(np.log(cand)[:, None] - np.log(cand)[None, :]) <= np.log(MIN_SEPARATION)
    F = np.stack([np.ones_like(cand), np.log(cand)], axis=-1)[None]
    G = np.array([[[1.0, np.log(target)]]])
    need = max(MIN_GROUPS - len(C), 0)
    d = greedy(
        cov0,
        F,
        G,
        runs * cand,
        sigma=sigma,
        budget=budget,
        max_runs=max(max_groups, need),
        min_gain=0.0,
        conflicts=close,
    )
    if len(d.chosen) < need:
        raise InputError(
            f"--budget-flops {budget:.3g} buys {len(d.chosen)} group(s); the law needs {need} more "
            f"(exponents need {MIN_GROUPS} or more compute groups)"
        )
    p = rec.get("params") or {}
    ratio = float(np.median(tpp)) if tpp.size else 20.0
    groups = []
    for m in sorted(d.chosen, key=lambda i: cand[i]):
        c = float(cand[m])
        if p.get("lr_exp_C") is not None and p.get("bs_exp_C") is not None:
            lr_c, bt_c = p["lr_coef"] * c ** p["lr_exp_C"], p["bs_coef"] * c ** p["bs_exp_C"]
        else:
            lr_c, bt_c = _line(C, lr, c), _line(C, bt, c)
        n = float(np.sqrt(c / (6.0 * ratio)))
        groups.append(
            {
                "C": c,
                "N": n,
                "D": c / (6.0 * n),
                "lr_centre": float(lr_c),
                "batch_tokens_centre": float(bt_c),
                "lrs": [float(lr_c * f) for f in LR_FACTORS],
                "batch_tokens": [float(bt_c * f) for f in BATCH_FACTORS],
                "runs": runs,
                "flops": runs * c,
            }
        )
    width = float(d.width_ratio()[0])
    return {
        "target_compute": target,
        "budget_flops": budget,
        "spent_flops": float(d.spent),
        "groups_today": len(C),
        "groups": groups,
        "width_ratio": width,
        "tokens_per_param": ratio,
        "sigma_log": sigma,
        "note": f"N at each compute from the groups' median {ratio:.3g} tokens per parameter (6 N D); "
        "the forecast width is the ratio of log lr_opt's (and log B_opt's) standard error at the target to "
        f"today's, with a weak prior (sd {PRIOR_SD:g}) standing in for what fewer than 2 groups cannot say",
    }


def format_batch_lr(p: dict) -> str:
    lines = [
        f"target: {p['target_compute']:.4g} FLOPs; the batch-lr law has {p['groups_today']} compute group(s) today "
        f"(exponents need {MIN_GROUPS} or more)",
        f"proposed {len(p['groups'])} groups, {p['spent_flops']:.4g} FLOPs of the {p['budget_flops']:.4g} budget:",
    ]
    for g in p["groups"]:
        model = g.get("model")
        shape = f" (d_model {model['d_model']}, {model['n_layers']} layers)" if model else ""
        seqs = f" = {', '.join(str(b) for b in g['batch_sizes'])} sequences" if g.get("batch_sizes") else ""
        lines.append(
            f"  C {g['C']:.4g}: N {g['N']:.4g}{shape}, D {g['D']:.4g}; lr "
            + ", ".join(f"{x:.3g}" for x in g["lrs"])
            + "; batch tokens "
            + ", ".join(f"{x:.3g}" for x in g["batch_tokens"])
            + f"{seqs} ({g['runs']} runs)"
        )
    lines.append(f"forecast: the standard error of log lr_opt and log B_opt at the target x{p['width_ratio']:.2f}")
    lines.append(f"note: {p['note']}")
    lines += [f"note: {n}" for n in p.get("sweep_notes", [])]
    return "\n".join(lines)
