"""Which compute a plan is made for, and the sections that price and extend it.

The budget forms (one of them): `--compute C` (FLOPs in the fit's convention), `--budget-usd X`,
`--device-hours H`, `--days D --num-devices K` (these three through the device table, an MFU and a
price: scaling.planning.cost), or `--target-loss L --inference-tokens T` (the inference-aware model
reaching L: scaling.planning.inference). `--compute C --inference-tokens T` reads C as the total
training + inference budget. With inference tokens the plan is made for the inference-aware
model's training FLOPs. The plan (scaling.planning.record.PlanRecord) gains `cost` (with --device) and `inference`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaling.core.errors import InputError
from scaling.fits.record import _clean
from scaling.planning import cost as costs
from scaling.planning.accuracy_chain import check, plan_block
from scaling.planning.cost import resolve_mfu
from scaling.planning.devices import peak_flops
from scaling.planning.inference import choose_preset, inference_block
from scaling.planning.layout import layout_block, priced_model_plan
from scaling.planning.layout_plan import fixed_keys, layout_sections, trainer_memory
from scaling.planning.plan import make_plan
from scaling.planning.planners import allocation, one_allocation_record, refuse_other_options
from scaling.planning.record import PlanRecord
from scaling.planning.run_model import model_presets
from scaling.planning.stages import parse_stages, stage_sections


@dataclass
class BudgetOptions:
    compute: float | None = None
    budget_usd: float | None = None
    device_hours: float | None = None
    days: float | None = None
    target_loss: float | None = None
    inference_tokens: float | None = None
    device: str | None = None
    precision: str | None = None
    num_devices: int | None = None
    mfu: str | None = None
    usd_per_device_hour: float | None = None
    runs: str | None = None
    model: str | None = None
    tokens: float | None = None
    devices_per_node: int | None = None
    layout: str | None = None  # --layout key=value,... (scaling/planning/layout_search.py)
    micro_batch_size: int | None = None  # --micro-batch-size: --layout micro_batch_size=...
    global_batch_tokens: float | None = None
    stages: str | None = None  # --stages TOKENS@SEQ,... (scaling/planning/stages.py), with --model

    def check(self) -> None:
        """Every combination error, before any work (InputError -> exit 2)."""
        forms = [
            f
            for f in ("compute", "budget_usd", "device_hours", "days", "target_loss", "model")
            if getattr(self, f) is not None
        ]
        flag = lambda f: "--" + f.replace("_", "-")  # noqa: E731
        if len(forms) != 1:
            raise InputError(
                "give exactly one budget: --compute, --budget-usd, --device-hours, --days (with --num-devices), "
                "--target-loss (with --inference-tokens) or --model (with --tokens)"
                + (f"; got {', '.join(map(flag, forms))}" if forms else "")
            )
        form = forms[0]
        if self.stages is not None and form != "model":
            raise InputError("--stages prices a given model in stages: it goes with --model (and --device)")
        if self.stages is not None:
            total = sum(t for t, _ in parse_stages(self.stages))
            if self.tokens is not None and abs(self.tokens - total) > 1e-9 * total:
                raise InputError(f"--tokens {self.tokens:g} differs from the stages' {total:g} tokens: give one")
        elif (form == "model") != (self.tokens is not None):
            raise InputError("--model CONFIG.yaml and --tokens D go together (price a given model trained on D tokens)")
        if form == "model" and not self.device:
            raise InputError("--model needs --device (the device it is priced and laid out on)")
        if self.tokens is not None and not self.tokens > 0:
            raise InputError(f"--tokens must be > 0 (got {self.tokens})")
        if self.devices_per_node is not None and self.devices_per_node < 1:
            raise InputError(f"--devices-per-node must be >= 1 (got {self.devices_per_node})")
        if form in ("budget_usd", "device_hours", "days") and not self.device:
            raise InputError(
                f"{flag(form)} needs --device (to turn it into FLOPs through the device's peak and an MFU)"
            )
        if form == "days" and not self.num_devices:
            raise InputError("--days needs --num-devices K (the wall-clock days of K devices)")
        if form == "budget_usd" and not self.usd_per_device_hour:
            raise InputError("--budget-usd needs --usd-per-device-hour (the price of one device for one hour)")
        if self.inference_tokens is not None and form == "model":
            raise InputError("--inference-tokens goes with --compute or --target-loss, not --model")
        if form == "target_loss" and self.inference_tokens is None:
            raise InputError(
                "--target-loss needs --inference-tokens T (the tokens the model will serve; 0 for training only)"
            )
        if self.inference_tokens is not None and form not in ("compute", "target_loss"):
            raise InputError(
                f"--inference-tokens goes with --compute (a total budget) or --target-loss, not {flag(form)}"
            )
        if not self.device:
            given = [
                f
                for f in (
                    "precision",
                    "num_devices",
                    "mfu",
                    "usd_per_device_hour",
                    "devices_per_node",
                    "layout",
                    "global_batch_tokens",
                )
                if getattr(self, f) is not None
            ]
            if given:
                raise InputError(
                    f"{', '.join(map(flag, given))}: applies only with --device (choose from the device table)"
                )
        for f in ("compute", "budget_usd", "device_hours", "days", "target_loss", "usd_per_device_hour"):
            v = getattr(self, f)
            if v is not None and not v > 0:
                raise InputError(f"{flag(f)} must be > 0 (got {v})")
        if self.inference_tokens is not None and not self.inference_tokens >= 0:
            raise InputError(f"--inference-tokens must be >= 0 (got {self.inference_tokens})")
        if self.num_devices is not None and self.num_devices < 1:
            raise InputError(f"--num-devices must be >= 1 (got {self.num_devices})")
        if self.global_batch_tokens is not None and not self.global_batch_tokens > 0:
            raise InputError(f"--global-batch-tokens must be > 0 (got {self.global_batch_tokens})")
        if self.layout is not None:
            fixed_keys(self.layout, self.micro_batch_size)
        if self.device:
            peak_flops(self.device, self.precision or "bf16")
            if self.mfu not in (None, "auto"):
                resolve_mfu(self.mfu, self.device, self.precision or "bf16", None)


def build_plan(
    fits: list, opts: BudgetOptions, make_plan_kw: dict, ci: float = 0.95, *, accuracy=None, task_loss=None
) -> PlanRecord:
    """The plan for the budget in `opts`, with its `cost` and `inference` sections, and with an
    accuracy fit (and a task-loss fit) the planned run's predicted accuracy per task
    (`accuracy`, `accuracy_basis`: scaling.planning.accuracy_chain)."""
    opts.check()
    if opts.model:
        return _given_model_plan(opts, make_plan_kw, ci)
    refuse_other_options(fits)  # the accuracy chain's records come with --accuracy / --task-loss
    chin = allocation(fits)[1]  # the allocating law's record that plans (Chinchilla: approach 3 among several)
    if accuracy is not None:
        check(accuracy, task_loss, chin)  # fits that do not chain: exit 2 before any work
    elif task_loss is not None:
        raise InputError(
            "--task-loss feeds --accuracy: give the accuracy fit too (--accuracy ACC.json from `scalelab fit accuracy`)"
        )
    hw = None
    if opts.device:
        precision = opts.precision or "bf16"
        mfu = costs.resolve_mfu(opts.mfu, opts.device, precision, opts.runs)
        hw = costs.Hardware(opts.device, precision, opts.num_devices or 1, mfu, opts.usd_per_device_hour)

    def plan_at(C):
        return make_plan(fits, C, ci=ci, **make_plan_kw)

    inf = None
    budget = None
    if opts.inference_tokens is not None:
        inf = inference_block(
            one_allocation_record(fits), opts.inference_tokens, target_loss=opts.target_loss, total=opts.compute, ci=ci
        )
        plan = plan_at(inf["train_flops"])
    elif opts.compute is not None:
        plan = plan_at(opts.compute)
    else:
        hours, text = costs.budget_device_hours(
            hw, budget_usd=opts.budget_usd, device_hours=opts.device_hours, days=opts.days
        )
        plan = costs.plan_for_budget(plan_at, hw, hours)
        plan = _budget_at_predicted_mfu(plan, plan_at, hw, hours, opts)
        budget = {
            "form": next(f for f in ("budget_usd", "device_hours", "days") if getattr(opts, f) is not None),
            "text": text,
            "device_hours": hours,
            "compute": plan["compute"],
        }
    if inf and plan.get("vocab_size"):
        seq_len = ((plan.get("recipe") or {}).get("settings") or {}).get("model.seq_len")
        run = choose_preset(chin, inf, model_presets(plan["vocab_size"], seq_len), ci)
        if run:
            inf["run"] = run
    if hw:
        _memory(plan, hw, opts)
        _layout(plan, hw, opts, mfu_from_model=budget is None)
        if inf:
            priced = {**plan, "run": inf["run"]} if inf.get("run") else plan  # its hardware FLOPs ratio
            plan["cost"] = costs.cost_block(
                priced,
                hw,
                ci=ci,
                flops=inf["train_flops"],
                tokens=inf["D"],
                flops_samples=inf.get("_train_flops_samples"),
                tokens_samples=inf.get("_D_samples"),
            )
            run = inf.get("run")
            if run:  # the preset actually trained spends other FLOPs than the continuous optimum
                hours = run["compute"]["trainer_flops"] / hw.flops_per_device_hour()
                run["device_hours"] = hours
                run["usd"] = hours * hw.usd_per_device_hour if hw.usd_per_device_hour else None
        else:
            plan["cost"] = costs.cost_block(plan, hw, ci=ci, budget=budget, fit=chin)
    if inf:
        for k in ("_train_flops_samples", "_D_samples"):
            inf.pop(k, None)
        plan["inference"] = inf
        plan["warnings"].append(
            f"inference-aware plan: the plan's compute is the training FLOPs of the inference-aware model "
            f"(N {inf['N']:.3g}, D {inf['D']:.3g}); N_opt/D_opt and the "
            "run above are the training-only optimum at that compute, "
            f"the inference-aware run is the inference section's (--emit-config writes that one)"
        )
    if accuracy is not None:
        block = plan_block(plan, accuracy, task_loss, chin, ci)
        plan["accuracy"], plan["accuracy_basis"] = block["tasks"], block["basis"]
        for rec, name in ((accuracy, "accuracy"), (task_loss, "task-loss")):
            plan["warnings"] += [f"{name} fit: {w}" for w in (rec or {}).get("warnings") or []]
        plan["warnings"] += block["warnings"]

    return PlanRecord(_clean(plan))


def _memory(plan: dict, hw, opts: BudgetOptions) -> None:
    """The planned run's memory and layout on the plan's devices (scaling.planning.layout)."""
    mem = layout_block(
        plan,
        hw.device,
        hw.num_devices,
        hw.precision,
        devices_per_node=opts.devices_per_node,
        global_batch_tokens=opts.global_batch_tokens,
    )
    if mem is None:
        return
    plan["memory"] = mem
    if mem.get("fits") is False:
        plan.setdefault("warnings", []).append(
            f"the planned run does not fit on {hw.num_devices} x {hw.device}: {mem['reason']}"
        )


def _given_model_plan(opts: BudgetOptions, make_plan_kw: dict, ci: float) -> PlanRecord:
    """`--model CONFIG --tokens D`: price and lay out a given model, no fit."""
    stages = parse_stages(opts.stages) if opts.stages else None
    tokens = sum(t for t, _ in stages) if stages else opts.tokens
    plan = priced_model_plan(opts.model, tokens, make_plan_kw.get("vocab_size"))
    plan["ci"] = ci
    precision = opts.precision or "bf16"
    mfu = costs.resolve_mfu(opts.mfu, opts.device, precision, opts.runs)
    hw = costs.Hardware(opts.device, precision, opts.num_devices or 1, mfu, opts.usd_per_device_hour)
    _memory(plan, hw, opts)
    _layout(plan, hw, opts, mfu_from_model=True)
    if stages:
        _stages(plan, hw, opts, stages)
    plan["cost"] = costs.cost_block(plan, hw, ci=ci)
    return PlanRecord(_clean(plan))


def _stages(plan: dict, hw, opts: BudgetOptions, stages: list) -> None:
    """Price the run per stage; the run's compute and the cost's MFU become the stages' sums."""
    given = hw.mfu.value if hw.mfu.source.startswith("given") else None
    priced = stage_sections(plan, hw, stages, opts, given)
    flops = sum(s["hardware_flops"] for s in priced)
    hours = sum(s["device_hours"] for s in priced)
    plan["stages"] = priced
    plan["compute"] = flops
    run = plan["run"]
    run["compute"]["trainer_flops"] = flops
    run["flops_per_token"] = flops / run["tokens"]
    run["stages"] = [f"{s['tokens']:g}@{s['seq_len']}" for s in priced]
    if given is None:
        m = flops / (hours * 3600.0 * hw.peak)
        hw.mfu = costs.MFU(m, f"the stages' FLOP-weighted MFU {m:.3f} (each predicted by the step-time model)")


def _predicted_mfu(perf: dict, describe: str, why: str = "") -> costs.MFU:
    m = perf["mfu"]
    return costs.MFU(
        m,
        f"predicted {m:.3f} by the step-time model for the searched layout ({describe}); "
        "+-20% interval: the model's calibration error (docs/model-design.md)"
        + (f"; no measurement: {why}" if why else ""),
        m * np.linspace(0.8, 1.2, 201),
    )


def _measured(hw) -> bool:
    return hw.mfu.source.startswith("measured") or hw.mfu.source.startswith("given")


def _layout_sections(plan: dict, hw, opts: BudgetOptions):
    """scaling.planning.layout_plan.layout_sections with the device and the user's --layout options."""
    return layout_sections(
        plan,
        hw.device,
        hw.num_devices,
        hw.precision,
        devices_per_node=opts.devices_per_node,
        layout=opts.layout,
        micro_batch_size=opts.micro_batch_size,
        global_batch_tokens=opts.global_batch_tokens,
    )


def _budget_at_predicted_mfu(plan: dict, plan_at, hw, hours: float, opts: BudgetOptions, rounds: int = 8) -> dict:
    """A budget form with --mfu auto and no finished runs: the MFU that buys the compute is the step-time
    model's for the run the budget buys, found by a few fixed-point rounds (budget -> run -> MFU -> budget)."""
    if _measured(hw):
        return plan
    for _ in range(rounds):  # a small model's MFU moves with its size: about 5 rounds to 0.1%
        got = _layout_sections(plan, hw, opts)
        if not got or got[1] is None:
            return plan
        m = got[1]["mfu"]
        if abs(m - hw.mfu.value) <= 1e-3 * m:
            break
        hw.mfu = _predicted_mfu(got[1], got[0]["describe"])
        plan = costs.plan_for_budget(plan_at, hw, hours)
    else:
        plan.setdefault("warnings", []).append(
            f"the budget's MFU ({hw.mfu.value:.3f}) and the step-time model's for the run it buys did not agree "
            f"within 0.1% after {rounds} rounds"
        )
    return plan


def _layout(plan: dict, hw, opts: BudgetOptions, *, mfu_from_model: bool) -> None:
    """The searched layout and its predicted performance (scaling.planning.layout_plan); with --mfu auto
    and no finished runs on the device, the cost takes the predicted MFU (not for the budget forms,
    whose compute the MFU already bought)."""
    got = _layout_sections(plan, hw, opts)
    if got is None:
        return
    plan["layout"], perf = got
    if perf is None:
        plan.setdefault("warnings", []).append(
            f"no layout of the run on {hw.num_devices} x {hw.device}: {plan['layout'].get('reason')}"
        )
        return
    plan["performance"] = perf
    mem = trainer_memory(plan, plan["layout"], hw.precision)
    if mem is not None:  # a layout the trainer runs: --emit-config and train --dry-run take it
        plan["memory"] = mem
    if mfu_from_model and not _measured(hw):
        why = hw.mfu.source.partition("no measurement: ")[2]  # why auto found no finished runs to take it from
        hw.mfu = _predicted_mfu(perf, plan["layout"]["describe"], why)


def price_layout(plan: dict, hw, opts: BudgetOptions) -> None:
    """What `scalelab plan FIT --compute C --device ...` adds to a plan before pricing it: the searched
    layout, its predicted performance, and (with --mfu auto and no finished runs) the step-time model's MFU
    in `hw` (the dashboard's Plan view prices each budget through this)."""
    _layout(plan, hw, opts, mfu_from_model=True)


def plan_to_emit(plan: PlanRecord) -> PlanRecord:
    """The plan whose run `--emit-config` writes: the inference-aware preset when there is one
    (trained with the fits' recipe: no batch-lr values are evaluated for it)."""
    run = (plan.get("inference") or {}).get("run")
    if not run:
        return plan
    keep = ("preset", "N", "seq_len", "tokens", "loss", "loss_interval")
    return PlanRecord({**plan, "run": {k: run[k] for k in keep}})
