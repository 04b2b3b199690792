"""The printed plan (`scalelab plan` without --json): the optimum, the planned run, its lr and batch,
then the sections that price and extend it (memory and layout, inference, cost, accuracy)."""

from __future__ import annotations

from scaling.planning.accuracy_chain import format_accuracy
from scaling.planning.cost import format_cost
from scaling.planning.inference import format_inference
from scaling.planning.layout import format_memory
from scaling.planning.layout_search import format_layout
from scaling.planning.record import PlanRecord
from scaling.planning.run_model import describe_run_model
from scaling.planning.stages import format_stages
from scaling.planning.verdict import format_verdict


def format_plan(plan: PlanRecord) -> str:
    def iv(v):
        return f"  [{v[0]:.4g}, {v[1]:.4g}]" if v else ""

    conv = plan.get("conventions") or {}
    lines = [
        f"compute: {plan['compute']:.4g} FLOPs ({conv.get('compute', '?')}; N = "
        f"{conv.get('n_kind', plan.get('n_kind'))} parameters; {plan.get('ci', 0.95):.0%} intervals)"
    ]
    verdict = plan.get("verdict")
    if verdict:
        lines += format_verdict(verdict, plan.get("ci", 0.95))
    if "N_opt" in plan:
        lines.append(f"N_opt: {plan['N_opt']:.4g} parameters ({plan['n_kind']}){iv(plan.get('N_opt_interval'))}")
        lines.append(
            f"D_opt: {plan['D_opt']:.4g} tokens{iv(plan.get('D_opt_interval'))}  "
            f"(D/N = {plan['D_opt'] / plan['N_opt']:.3g})"
        )
    dc = plan.get("data_constrained")
    if dc:
        lines.append(
            f"unique tokens: {dc['unique_tokens']:.4g} ({dc['source']}): D_opt is {dc['epochs']:.3g} epochs; "
            f"with unlimited unique data N_opt would be {dc['N_opt_fresh']:.4g}, D_opt {dc['D_opt_fresh']:.4g}"
        )
    if "loss_at_optimum" in plan:
        lines.append(f"loss at the optimum: {plan['loss_at_optimum']:.4f}")
    r = plan.get("run")
    if r:
        lines.append(f"run: {describe_run_model(r)}")
        ratio = f"{r['ratio_to_N_opt']:.3g}x N_opt; " if r.get("ratio_to_N_opt") else ""
        lines.append(
            f"     {r['N']:.4g} {r['n_kind']} params ({r['params']:.4g} total, {ratio}{r['choice']}), "
            f"{r['tokens']:.4g} tokens, {r['flops_per_token']:.4g} trainer FLOPs per token"
            + (f" ({r['epochs']:.2g} epochs of the data)" if r.get("epochs") else "")
        )
        if r.get("shape_rule_source"):
            lines.append(f"     shape rule: {r['shape_rule_source']}")
        if "loss" in r:
            lines.append(
                f"predicted loss: {r['loss']:.4f}{iv(r.get('loss_interval'))}  "
                f"({plan.get('ci', 0.95):.0%} {r['loss_interval_kind']})"
            )
        if "lr" in r:
            lines.append(f"lr: {r['lr']:.4g}{iv(r.get('lr_interval'))}")
            lines.append(f"batch: {r['batch_tokens']:.4g} tokens{iv(r.get('batch_tokens_interval'))}")
    elif "lr" in plan:
        lines.append(f"lr: {plan['lr']:.4g}{iv(plan.get('lr_interval'))}")
        lines.append(f"batch: {plan['batch_tokens']:.4g} tokens{iv(plan.get('batch_tokens_interval'))}")
    if "B_crit_tokens" in plan:
        lines.append(f"critical batch: {plan['B_crit_tokens']:.4g} tokens")
    lines += format_sections(plan)
    grouped = set((verdict or {}).get("warnings") or [])
    for w in plan.get("warnings", []):
        if w not in grouped:
            lines.append(f"warning: {w}")
    return "\n".join(lines)


def format_sections(plan: PlanRecord) -> list[str]:
    lines = []
    if plan.get("memory"):
        lines += format_memory(plan["memory"])
    if plan.get("layout"):
        lines += format_layout({**plan["layout"], "performance": plan.get("performance")})
    if plan.get("stages"):
        lines += format_stages(plan["stages"])
    if plan.get("inference"):
        lines += format_inference(plan["inference"])
    if plan.get("cost"):
        lines += format_cost(plan["cost"], plan.get("ci", 0.95))
    if plan.get("accuracy_basis"):
        lines += format_accuracy(
            {"basis": plan["accuracy_basis"], "tasks": plan.get("accuracy") or {}}, plan.get("ci", 0.95)
        )
    return lines
