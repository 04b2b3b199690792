"""The laws across (model, target) fits: B_crit(N) on each model's lowest target, B_crit(D) with D = 2 E_min,
the joint B_crit(N, D), Kaplan's B_crit(L); and the holdout of the largest-compute model."""

from __future__ import annotations

import numpy as np

from scaling.core.regression import ols
from scaling.core.selection import distinct
from scaling.fits import pipeline


def primary(rows: list[dict]) -> list[dict]:
    """Each model's lowest-target row among those that enter the laws."""
    best: dict[int, dict] = {}
    for r in rows:
        if not r["in_laws"]:
            continue
        cur = best.get(r["group"])
        t = r["target_loss"] if r["target_loss"] is not None else np.inf
        if cur is None or t < (cur["target_loss"] if cur["target_loss"] is not None else np.inf):
            best[r["group"]] = r
    return [best[g] for g in sorted(best)]


def across(rows: list[dict]) -> tuple[dict[str, float], dict[str, str]]:
    """The laws across (model, target) fits; returns (params, why-not notes)."""
    out: dict[str, float] = {}
    why: dict[str, str] = {}
    prim = primary(rows)
    used = [r for r in rows if r["in_laws"]]
    if distinct(np.array([r["N"] for r in prim] or [1.0])) >= 2:
        (c, e), _ = ols(np.log([r["N"] for r in prim]), np.log([r["B_crit"] for r in prim]))
        out.update(bcrit_coef=float(np.exp(c)), bcrit_exp_N=float(e))
    else:
        why["bcrit_N"] = "fewer than 2 model sizes with an identified B_crit"
    D = np.array([r["D_at_B_crit"] for r in used] or [1.0])
    if distinct(D, 1e-3) >= 2:
        (c, e), _ = ols(np.log(D), np.log([r["B_crit"] for r in used]))
        out.update(bcrit_coef_D=float(np.exp(c)), bcrit_exp_D=float(e))
    else:
        why["bcrit_D"] = "fewer than 2 distinct D among identified fits"
    if len(used) >= 4 and distinct(np.array([r["N"] for r in used])) >= 2 and distinct(D, 1e-3) >= 2:
        X = np.column_stack([np.log([r["N"] for r in used]), np.log(D)])
        corr = np.corrcoef(X.T)[0, 1]
        if abs(corr) < 0.98:
            (c, eN, eD), _ = ols(X, np.log([r["B_crit"] for r in used]))
            out.update(bcrit_joint_coef=float(np.exp(c)), bcrit_joint_exp_N=float(eN), bcrit_joint_exp_D=float(eD))
        else:
            why["bcrit_joint"] = f"log N and log D collinear across fits (corr {corr:.3f})"
    else:
        why["bcrit_joint"] = "needs 4+ identified fits spanning 2+ model sizes and 2+ D"
    withL = [r for r in used if r["target_loss"] is not None]
    if distinct(np.array([r["target_loss"] for r in withL] or [1.0]), 1e-4) >= 2:
        (c, e), _ = ols(np.log([r["target_loss"] for r in withL]), np.log([r["B_crit"] for r in withL]))
        if e < 0:
            out.update(B_star=float(np.exp(c)), alphaB=float(-1.0 / e))
        else:
            why["kaplan"] = (
                f"B_crit does not fall as the target loss falls (slope {e:+.3g} in log-log); B_crit(L) not fitted"
            )
    else:
        why["kaplan"] = "fewer than 2 distinct target losses"
    return out, why


def holdout_largest(rows: list[dict], compute: dict[int, float]) -> dict:
    """Hold out the largest-compute model: predict its B_crit from the laws fitted on the rest."""
    prim = primary(rows)
    if len(prim) < 3:
        return {"n_points": 0, "note": "needs 3+ model sizes with an identified B_crit (2 to fit, 1 held out)"}
    g = max((r["group"] for r in prim), key=lambda k: compute[k])
    held = next(r for r in prim if r["group"] == g)
    params, _ = across([r for r in rows if r["group"] != g])
    out = {
        "model_N": held["N"],
        "target_loss": held["target_loss"],
        "B_crit_fitted": held["B_crit"],
        "D_at_B_crit": held["D_at_B_crit"],
        "n_points": int(held["n_runs"]),
        "held_out_by": "largest compute",
        "note": "B_crit(D) uses the held-out model's own D = 2 E_min: "
        "it tests the law's form, not a forecast from N alone",
    }
    errs = []
    if "bcrit_coef" in params:
        p = params["bcrit_coef"] * held["N"] ** params["bcrit_exp_N"]
        out.update(predicted_from_N=p, rel_error_from_N=p / held["B_crit"] - 1)
        errs.append(abs(out["rel_error_from_N"]))
    if "bcrit_coef_D" in params:
        p = params["bcrit_coef_D"] * held["D_at_B_crit"] ** params["bcrit_exp_D"]
        out.update(predicted_from_D=p, rel_error_from_D=p / held["B_crit"] - 1)
        errs.append(abs(out["rel_error_from_D"]))
    out["fitted_on"] = {k: v for k, v in params.items() if k.startswith("bcrit_")}
    if errs:
        out.update(pipeline.error_summary(errs))
    return out
