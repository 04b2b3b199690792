"""`scalelab plan FIT_moe.json --compute C`: the best (N_active, E, G, D) for a budget under an MoE law.

C is in the record's convention (6 N D, N = active non-embedding parameters). Krajewski: the
compute-optimal (N, D) at each granularity the data's range holds (powers of two and the fitted
values; scaling.fits.moe.optimum), the best of them, E = the runs' expansion rate x G experts with
top_k = the runs' top-k per unit of G x G (the active FFN the runs had), and next to it the dense
optimum (G = 1, E = 1, same law), the loss gain and the dense-compute multiplier. Clark: the
runs' tokens are kept (the law has no data term), N = C / (6 D), the best expert count in range.
Warnings: every fit warning, a better G or E beyond the fitted range (not taken), extrapolation.
The run: a model designed at the optimum (scaling.planning.moe_run.designed: a dense shape of the named rule
made MoE with the plan's E, top_k and expert d_ff = d_ff / G, its active non-embedding count
N_opt); with --presets-only the configs/models/ preset whose MoE version predicts the lowest loss
at C (Krajewski; nearest N_opt for Clark). Written by `scaling.planning.moe_run.emit_moe_config` like
`scaling.planning.emit.emit_config`.
"""

from __future__ import annotations

import numpy as np

from scaling.core.bootstrap import interval
from scaling.core.diagnostics import EXTRAPOLATION_WARN_FACTOR
from scaling.core.errors import InputError
from scaling.fits.moe import optimum as opt
from scaling.fits.moe.prediction import bootstrap_law
from scaling.fits.record import FitRecord, _clean
from scaling.planning.moe_run import choose_run
from scaling.planning.record import PlanRecord
from scaling.planning.run_model import describe_run_model


def make_moe_plan(
    rec: FitRecord,
    compute: float,
    *,
    ci: float = 0.95,
    compute_kind: str | None = None,
    vocab_size: int | None = None,
    presets_only: bool = False,
    shape_rule: str | None = None,
) -> PlanRecord:
    if rec.get("law") != "moe":
        raise InputError(f"an MoE plan needs a `scalelab fit moe` record (got a {rec.get('law')} record)")
    if not (compute > 0 and np.isfinite(compute)):
        raise InputError(f"--compute must be a positive number of FLOPs (got {compute})")
    conv = rec.get("conventions") or {}
    if not conv.get("compute"):
        raise InputError(
            "the MoE fit has no compute convention (its data had no token counts D): it cannot plan a budget"
        )
    if compute_kind and compute_kind != conv["compute"]:
        raise InputError(
            f"--compute-kind {compute_kind} differs from the MoE fit's convention "
            f"({conv['compute']}): give the budget in {conv['compute']} FLOPs"
        )
    name = rec["settings"]["law"]
    C = float(compute)
    warnings = [f"moe {name} fit: {w}" for w in rec.get("warnings") or []]
    out: dict = {
        "compute": C,
        "ci": ci,
        "law": name,
        "conventions": {"compute": conv["compute"], "n_kind": conv["n_kind"]},
        "n_kind": conv["n_kind"],
        "fits": [{"law": "moe", "form": name, "data_sha256": rec.get("data_sha256")}],
    }
    (_krajewski if name == "krajewski" else _clark)(out, rec, C, ci, warnings)
    rng = rec.get("data_range") or {}
    if rng.get("C"):
        out["extrapolation_factor"] = C / rng["C"][1]
        if out["extrapolation_factor"] > EXTRAPOLATION_WARN_FACTOR:
            warnings.append(
                f"compute {C:.3g} is {out['extrapolation_factor']:.3g}x the largest fitted run "
                f"({rng['C'][1]:.3g} FLOPs): a far extrapolation, intervals understate the risk"
            )
        elif C < rng["C"][0]:
            warnings.append(f"compute {C:.3g} is below the smallest fitted run ({rng['C'][0]:.3g} FLOPs)")
    recipe = rec.get("recipe") or {}
    if recipe:
        out["recipe"] = {"settings": recipe.get("settings"), "data": recipe.get("data")}

    run = choose_run(
        rec,
        out,
        vocab_size,
        ci,
        warnings,
        presets_only=presets_only,
        shape_rule=None if shape_rule == "runs" else shape_rule,
    )
    if run:
        out["run"] = run
    out["warnings"] = warnings
    return PlanRecord(_clean(out))


def _shape(rec, G: float, warnings) -> dict:
    """E and top_k of an MoE at granularity G, from the runs' expansion rate and top-k per G."""
    d = rec.get("design") or {}
    expansion, k_per_g = d.get("expansion"), d.get("top_k_per_G")
    if k_per_g is None:
        k_per_g = 1.0
        warnings.append(
            "the fit's data give no top_k: the plan takes top_k = G (an active FFN as wide as the dense one)"
        )
    top_k = max(1, int(round(k_per_g * G)))
    if expansion is None:
        warnings.append("the fit's data give no expert counts (E): the plan cannot size the experts")
        return {"E": None, "top_k": top_k, "expansion": None}
    E = max(top_k, int(round(expansion * G)))
    if d.get("E") and E > max(d["E"]):
        warnings.append(
            f"the plan's E = {E} experts is more than the fitted runs "
            f"had (up to {max(d['E']):g}): the law has no E term, "
            "so this rests on the runs' expansion rate holding"
        )
    return {"E": E, "top_k": top_k, "expansion": expansion}


def _krajewski(out, rec, C, ci, warnings) -> None:
    law = rec.law()
    G_data = (rec.get("design") or {}).get("G") or [1.0]
    grid, nxt = opt.candidates(G_data)
    best = opt.krajewski_best(law, C, grid)
    G = best["G"]
    if nxt is not None:
        beyond = opt.krajewski_at(law, C, nxt)
        if float(beyond["loss"]) < best["loss"] - 1e-9:
            warnings.append(
                f"the law keeps improving with finer experts beyond the fitted range: G = {nxt:g} would predict "
                f"{float(beyond['loss']):.4f} ({best['loss'] - float(beyond['loss']):.3g} "
                f"lower); the plan stays within the fitted G <= {max(G_data):g}"
            )
    if G >= max(G_data) and len(grid) > 1:
        warnings.append(
            f"the best granularity is the finest the runs had (G = {G:g}): the optimum may lie beyond the fitted range"
        )
    dense = opt.krajewski_at(law, C, 1.0)
    out.update(
        {
            "N_opt": best["N_opt"],
            "D_opt": best["D_opt"],
            "G": G,
            **_shape(rec, G, warnings),
            "loss_at_optimum": best["loss"],
            "dense": {
                "N_opt": float(dense["N_opt"]),
                "D_opt": float(dense["D_opt"]),
                "loss": float(dense["loss"]),
                "E": 1,
                "G": 1.0,
            },
            "gain": float(dense["loss"]) - best["loss"],
            "compute_multiplier": float(opt.compute_multiplier(law, G)),
            "candidates": [{k: float(v) for k, v in opt.krajewski_at(law, C, g).items()} for g in grid],
        }
    )
    if not (rec.get("design") or {}).get("dense_runs"):
        warnings.append("no dense runs in the fit: the dense baseline is the law at G = 1, i.e. a coarse-grained MoE")
    draws = bootstrap_law(rec)
    if draws is not None:
        m, d = opt.krajewski_at(draws, C, G), opt.krajewski_at(draws, C, 1.0)
        _intervals(
            out,
            {
                "N_opt": m["N_opt"],
                "D_opt": m["D_opt"],
                "loss_at_optimum": m["loss"],
                "gain": d["loss"] - m["loss"],
                "compute_multiplier": opt.compute_multiplier(draws, G),
            },
            ci,
        )
        _intervals(out["dense"], {"N_opt": d["N_opt"], "D_opt": d["D_opt"], "loss": d["loss"]}, ci)
    else:
        warnings.append("the MoE fit has no bootstrap samples: no intervals (fit with --bootstrap N)")


def _clark(out, rec, C, ci, warnings) -> None:
    law = rec.law()
    d = rec.get("design") or {}
    D = d.get("D_geomean")
    N = C / (6.0 * D)
    grid, nxt = opt.candidates(d.get("E") or [1.0], integer=True)
    best = opt.clark_best(law, N, grid)
    warnings.append(
        "Clark's law has no data term: the plan keeps the fitted runs' "
        f"tokens D = {D:.3g} and spends the budget on N = C / (6 D); "
        "it does not optimise the N:D split (fit --law krajewski for that)"
    )
    if nxt is not None and float(law.predict(N, nxt)) < best["loss"] - 1e-9:
        warnings.append(
            f"the law keeps improving with more experts beyond the fitted range: E = {nxt:g} would predict "
            f"{float(law.predict(N, nxt)):.4f}; the plan stays within the fitted E <= {max(grid):g}"
        )
    cut = law.cutoff_N
    if cut is not None and N > cut:
        warnings.append(f"N = {N:.3g} is beyond the law's cutoff {cut:.3g}, where more experts stop helping")
    G = float(d.get("G_moe") or 1.0)
    dense = opt.clark_at(law, N, 1.0)
    out.update(
        {
            "N_opt": N,
            "D_opt": D,
            "E": int(best["E"]),
            "G": G,
            "top_k": int(d.get("top_k") or 1),
            "loss_at_optimum": best["loss"],
            "dense": {"N_opt": N, "D_opt": D, "loss": float(dense["loss"]), "E": 1, "G": 1.0},
            "gain": float(dense["loss"]) - best["loss"],
            "compute_multiplier": best["effective_params"] / N,
            "cutoff_N": cut,
            "candidates": [{k: float(v) for k, v in opt.clark_at(law, N, e).items()} for e in grid],
        }
    )
    draws = bootstrap_law(rec)
    if draws is not None:
        m, dd = opt.clark_at(draws, N, best["E"]), opt.clark_at(draws, N, 1.0)
        _intervals(
            out,
            {
                "loss_at_optimum": m["loss"],
                "gain": dd["loss"] - m["loss"],
                "compute_multiplier": m["effective_params"] / N,
            },
            ci,
        )
        _intervals(out["dense"], {"loss": dd["loss"]}, ci)


def _intervals(target: dict, draws: dict, ci: float) -> None:
    for k, v in draws.items():
        iv = interval(v, ci)
        if iv is not None:
            target[f"{k}_interval"] = iv


def format_moe_plan(plan: PlanRecord) -> str:
    def iv(v):
        return f"  [{v[0]:.4g}, {v[1]:.4g}]" if v else ""

    conv = plan.get("conventions") or {}
    lines = [
        f"compute: {plan['compute']:.4g} FLOPs ({conv.get('compute')}; N = {conv.get('n_kind')} "
        f"parameters; law: {plan['law']}; {plan.get('ci', 0.95):.0%} intervals)",
        f"MoE optimum: N_active {plan['N_opt']:.4g}{iv(plan.get('N_opt_interval'))}, "
        f"D {plan['D_opt']:.4g} tokens{iv(plan.get('D_opt_interval'))}, "
        f"E = {plan.get('E')} experts, G = {plan['G']:g}, top_k = {plan.get('top_k')}",
        f"  loss {plan['loss_at_optimum']:.4f}{iv(plan.get('loss_at_optimum_interval'))}",
    ]
    d = plan["dense"]
    lines.append(
        f"dense optimum (E = 1, G = 1): N {d['N_opt']:.4g}, D {d['D_opt']:.4g} "
        f"tokens, loss {d['loss']:.4f}{iv(d.get('loss_interval'))}"
    )
    lines.append(
        f"predicted gain: {plan['gain']:.4f} nats{iv(plan.get('gain_interval'))}; the dense model needs "
        f"{plan['compute_multiplier']:.3g}x{iv(plan.get('compute_multiplier_interval'))} the compute to match"
    )
    r = plan.get("run")
    if r:
        lines.append(
            f"run: {describe_run_model(r)} with {r['E']} experts of d_ff "
            f"{r['expert_d_ff']} (G = {r['G']:g}), top_k {r['top_k']}: "
            f"{r['N']:.4g} active non-embedding params ({r['ratio_to_N_opt']:.3g}x "
            f"N_opt; {r['choice']}), {r['tokens']:.4g} tokens"
        )
        lines.append(f"predicted loss: {r['loss']:.4f}{iv(r.get('loss_interval'))}")
    lines += [f"warning: {w}" for w in plan.get("warnings", [])]
    return "\n".join(lines)
