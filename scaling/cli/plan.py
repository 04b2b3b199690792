"""`scalelab plan`: fit records -> the run to train for a budget (scaling.planning), or with the record of a
law that plans alone (a `fit moe` record) that law's plan (its planner's `alone`, scaling.planning.planners).
Exit codes: 0 ok, 2 bad input.
"""

from __future__ import annotations

import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from scaling.cli.options import COMPUTE_KINDS, DEVICE_NAMES, check_outputs, fail, positive_float
from scaling.core.errors import InputError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plan",
        help="compute-optimal N, D, lr, batch and loss for a compute budget",
        description="Combine fit records into a recommendation for compute C; with a `fit moe` record: "
        "the best (N_active, E, G, D) and the dense optimum beside it.",
    )
    _add_fits(p)
    _add_budget(p)
    _add_model_choice(p)
    _add_pricing(p)
    _add_conventions(p)
    _add_emit(p)
    _add_layout(p)
    _add_chain_and_output(p)
    p.set_defaults(func=cmd_plan)


def _add_fits(p) -> None:
    """The fit records planned from: positional and --fit."""
    p.add_argument("fit_files", nargs="*", metavar="FIT.json", help="fit records (the same as --fit)")
    p.add_argument(
        "--fit",
        action="append",
        default=[],
        metavar="F.json",
        help="fit record (chinchilla required, approach 3 plans and an approach 1 or 2 record beside it cross-checks "
        "its exponent in the verdict; batch-lr, critical-batch optional; or one moe record); repeatable",
    )


def _add_budget(p) -> None:
    """The budget, one form of it (a mutually exclusive group), and a given model's tokens and stages."""
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument(
        "--compute",
        type=positive_float,
        metavar="C",
        help="training compute budget in FLOPs, e.g. 1e21, in the chinchilla fit's convention "
        "(with --inference-tokens: the total training + inference budget)",
    )
    budget.add_argument(
        "--budget-usd",
        type=positive_float,
        metavar="X",
        help="dollar budget (needs --device and --usd-per-device-hour)",
    )
    budget.add_argument("--device-hours", type=positive_float, metavar="H", help="device-hour budget (needs --device)")
    budget.add_argument(
        "--days", type=positive_float, metavar="D", help="wall-clock days on --num-devices K devices (needs --device)"
    )
    budget.add_argument(
        "--target-loss",
        type=positive_float,
        metavar="L",
        help="plan the model reaching this loss with the least training + inference FLOPs (needs --inference-tokens)",
    )
    budget.add_argument(
        "--model",
        metavar="CONFIG.yaml",
        help="price and lay out a given model (a train config or a `scalelab model design` "
        "file) trained on --tokens D; no fit needed (needs --device)",
    )
    p.add_argument("--tokens", type=positive_float, metavar="D", help="training tokens of --model")
    p.add_argument(
        "--stages",
        metavar="TOKENS@SEQ,...",
        help="price --model in stages, e.g. 14.8e12@8192,0.8e12@131072 (tokens at a sequence length, each "
        "laid out and priced on its own; --tokens is their sum)",
    )


def _add_model_choice(p) -> None:
    """How the planned model is chosen: a preset, or a design of this shape rule."""
    p.add_argument(
        "--presets-only",
        action="store_true",
        help="choose the run among the dense configs/models/ presets instead of designing the model at N_opt",
    )
    p.add_argument(
        "--shape-rule",
        choices=("runs", "marin", "olmo-ladder"),
        default=None,
        help="how the planned model is shaped: runs (the fit's runs' "
        "family; the default when the record names their shapes), "
        "marin (the default otherwise) or olmo-ladder (models/design.py)",
    )


def _add_pricing(p) -> None:
    """What prices the plan: the devices, inference tokens, precision, MFU and price."""
    p.add_argument(
        "--devices-per-node",
        type=int,
        metavar="G",
        help="devices per node for the layout (default 8 when it divides --num-devices)",
    )
    p.add_argument(
        "--inference-tokens",
        type=float,
        metavar="T",
        help="tokens the model will serve: minimise 6ND + 2NT (Sardana et al. 2024)",
    )
    p.add_argument(
        "--device",
        choices=DEVICE_NAMES,
        metavar="NAME",
        help="price the plan on this device: " + ", ".join(DEVICE_NAMES),
    )
    p.add_argument(
        "--precision",
        choices=("bf16", "fp16", "fp32", "tf32", "fp8"),
        help="training precision for the device's dense peak (default bf16); fp8: Transformer Engine's "
        "recipe, priced only (the trainer has no fp8: --emit-config refuses it)",
    )
    p.add_argument(
        "--num-devices", type=int, metavar="K", help="devices trained on in parallel (default 1; required with --days)"
    )
    p.add_argument(
        "--mfu",
        metavar="auto|X",
        help="model FLOPs utilisation: a number in (0, 1], or auto (default): the median of the largest "
        "finished runs on that device under --runs, else a stated default of 0.40",
    )
    p.add_argument("--usd-per-device-hour", type=positive_float, metavar="P", help="price of one device for one hour")
    p.add_argument(
        "--runs", default="runs", metavar="DIR", help="run-directory tree read by --mfu auto (default: runs)"
    )


def _add_conventions(p) -> None:
    """The conventions of the budget and the planned run: compute kind, unique tokens, vocabulary."""
    p.add_argument(
        "--compute-kind",
        choices=COMPUTE_KINDS,
        default=None,
        help="the convention --compute is given in; refused when it differs from the fit's",
    )
    p.add_argument(
        "--unique-tokens",
        type=positive_float,
        metavar="U",
        help="unique training tokens the planned run can draw from: a data-constrained fit (fit chinchilla "
        "--law data-constrained) allocates the budget for them (default: the fitted runs' data set)",
    )
    p.add_argument(
        "--vocab-size", type=int, help="vocabulary for counting preset parameters (default: configs/data/default.yaml)"
    )


def _add_emit(p) -> None:
    """--emit-config and when it refuses (the verdict's --identified-span)."""
    p.add_argument(
        "--emit-config",
        metavar="out.yaml",
        help="write a train config for the recommendation (with --device also "
        "out.sweep.yaml: the run as a one-run Slurm sweep with the plan's layout)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="emit the config even when the plan's verdict is 'not identified at this budget'",
    )
    p.add_argument(
        "--identified-span",
        type=positive_float,
        default=4.0,
        metavar="F",
        help="the verdict: the law is identified at the budget only when N_opt's bootstrap interval spans at most "
        "this factor (default 4) and the approaches given agree on the exponent",
    )


def _add_layout(p) -> None:
    """The run's layout on the devices: micro batch, fixed layout choices, global batch."""
    p.add_argument(
        "--micro-batch-size",
        type=int,
        default=None,
        help="micro batch (sequences): with --device the same as --layout micro_batch_size=B; the emitted "
        "config's micro batch when no layout fits (default 16)",
    )
    p.add_argument(
        "--layout",
        metavar="KEY=VALUE,...",
        help="fix layout choices (with --device), e.g. tp=8,pp=16 or zero_stage=3,micro_batch_size=8,"
        "activation_checkpointing=full; keys: tp, cp, pp, dp, ep_size, zero_stage, micro_batch_size, "
        "gradient_accumulation_steps, activation_checkpointing (none|selective|every_k|full), "
        "activation_checkpointing_k, sequence_parallel, pp_interleave; the rest is searched",
    )
    p.add_argument(
        "--global-batch-tokens",
        type=positive_float,
        metavar="T",
        help="the global batch the layout meets exactly, in tokens (whole sequences; default: the batch-lr "
        "fit's batch at the run, else the fitted runs', else 4M)",
    )


def _add_chain_and_output(p) -> None:
    """The accuracy chain's fits, the interval level, and where the plan goes."""
    p.add_argument(
        "--accuracy",
        metavar="ACC.json",
        help="an accuracy fit (`scalelab fit accuracy`): print the planned run's predicted accuracy per task",
    )
    p.add_argument(
        "--task-loss",
        metavar="TL.json",
        help="a task-loss fit (`scalelab fit task-loss`): the planned run's task loss fed to --accuracy",
    )
    p.add_argument("--ci", type=float, default=0.95)
    p.add_argument("--out", metavar="plan.json", help="write the plan as JSON")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")


def cmd_plan(args) -> int:
    # deferred: numpy, scipy, pandas (a fast --help)
    from scaling.fits.record import FitRecord  # deferred: numpy (a fast --help)
    from scaling.planning.budget import BudgetOptions  # deferred: imports scipy
    from scaling.planning.planners import alone  # deferred: imports numpy (a fast --help)
    from scaling.planning.report import format_plan  # deferred: imports scipy

    problem = check_outputs(args)
    if problem:
        return fail(problem, 2)
    if args.vocab_size is not None and args.vocab_size <= 0:
        return fail(f"--vocab-size must be > 0 (got {args.vocab_size})", 2)
    if args.micro_batch_size is not None and args.micro_batch_size <= 0:
        return fail(f"--micro-batch-size must be > 0 (got {args.micro_batch_size})", 2)
    opts = BudgetOptions(
        compute=args.compute,
        budget_usd=args.budget_usd,
        device_hours=args.device_hours,
        days=args.days,
        target_loss=args.target_loss,
        inference_tokens=args.inference_tokens,
        device=args.device,
        precision=args.precision,
        num_devices=args.num_devices,
        mfu=args.mfu,
        usd_per_device_hour=args.usd_per_device_hour,
        runs=args.runs,
        model=args.model,
        tokens=args.tokens,
        devices_per_node=args.devices_per_node,
        layout=args.layout,
        micro_batch_size=args.micro_batch_size if args.device else None,
        global_batch_tokens=args.global_batch_tokens,
        stages=args.stages,
    )
    try:
        opts.check()
        fits = [FitRecord.load(f) for f in list(args.fit_files) + list(args.fit)]
        if args.model and fits:
            raise InputError("--model prices a given model without a fit: give no fit records with it")
        if args.model and (args.presets_only or args.shape_rule):
            raise InputError("--presets-only and --shape-rule choose the planned model; --model gives it")
        if not fits and not args.model:
            raise InputError("plan needs a fit record: scalelab plan FIT.json --compute C (or --fit F.json)")
        grouped = [f"{f['law']} --by {f['by']}" for f in fits if f.get("by")]
        if grouped:
            raise InputError(
                f"a {grouped[0]} record holds one law per value, not one law to plan from: fit the runs of one value "
                "(e.g. a table or run tree of those runs) without --by"
            )
        own = alone(fits)  # a law that plans alone (MoE) takes every record
        if own is not None and own.alone is not None:
            plan, text = own.alone(fits, args), own.format or format_plan
        else:
            plan, text = _dense_plan(args, fits, opts), format_plan
    except InputError as exc:
        return fail(str(exc), 2)
    if args.out:
        plan.save(args.out)
    print(plan.to_json() if args.json else text(plan))
    if args.emit_config:
        print(
            f"wrote {args.emit_config}" + (f" and {plan['emitted_sweep']}" if plan.get("emitted_sweep") else ""),
            file=sys.stderr,
        )
    return 0


def _dense_plan(args, fits: list, opts):
    """The plan of the allocating law's records (scaling.planning.budget.build_plan), emitted with --emit-config."""
    from scaling.fits.record import FitRecord  # deferred: numpy (a fast --help)
    from scaling.planning.budget import build_plan, plan_to_emit  # deferred: imports scipy
    from scaling.planning.emit import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        emit_config,
        sweep_spec_path,
    )
    from scaling.planning.verdict import identified  # deferred: imports numpy (a fast --help)

    chain = {
        k: FitRecord.load(v) if v else None for k, v in (("accuracy", args.accuracy), ("task_loss", args.task_loss))
    }
    kw = {"vocab_size": args.vocab_size, "compute_kind": args.compute_kind, "unique_tokens": args.unique_tokens}
    if not args.model:
        kw.update(presets_only=args.presets_only, shape_rule=args.shape_rule, identified_span=args.identified_span)
    plan = build_plan(fits, opts, kw, ci=args.ci, **chain)
    if args.emit_config and args.precision == "fp8":
        raise InputError(
            "--emit-config with --precision fp8: the trainer has no fp8 (Transformer Engine) path; price the "
            "fp8 run without --emit-config, or emit the bf16 plan"
        )
    unbuilt = [f"model.{k}" for k in ("mla", "mtp_depth") if ((plan.get("run") or {}).get("model") or {}).get(k)]
    if args.emit_config and unbuilt:
        raise InputError(
            f"--emit-config with {' and '.join(unbuilt)}: the trainer does not build multi-head latent "
            "attention or multi-token prediction (the planner prices them); price the run without --emit-config"
        )
    if args.emit_config and not identified(plan) and not args.force:
        raise InputError(
            f"--emit-config: the law is not identified at {plan['compute']:.3g} FLOPs ("
            + "; ".join(plan["verdict"]["reasons"] + (plan["verdict"].get("batch_lr") or {}).get("reasons", []))
            + "): a config for this run would train a guess. `scalelab study next` proposes the runs that "
            "would identify it; --force emits it anyway"
        )
    if args.emit_config:
        emit_config(plan_to_emit(plan), args.emit_config, micro_batch_size=args.micro_batch_size or 16)
        plan["emitted_config"] = args.emit_config
        _emit_layout_table(plan, Path(args.emit_config))
        if sweep_spec_path(Path(args.emit_config)).exists() and (plan.get("memory") or {}).get("fits"):
            plan["emitted_sweep"] = str(sweep_spec_path(Path(args.emit_config)))
    return plan


def _emit_layout_table(plan: MutableMapping[str, Any], config: Path) -> None:
    """Beside an emitted config: when the searched layout needs TP, PP or selective recomputation, which the
    trainer does not run, `<stem>.layout.txt` holds that layout's table and the plan says so."""
    from scaling.planning.layout_search import format_layout  # deferred: a fast --help

    lay = plan.get("layout") or {}
    if not lay.get("fits") or lay.get("trainer_runs"):
        return
    path = config.with_name(config.stem + ".layout.txt")
    mem = plan.get("memory") or {}
    batch = ""  # the trainer's data parallelism rounds the batch up to a multiple of the devices: say so
    if mem.get("global_batch_size") and mem["global_batch_size"] != lay.get("global_batch_size"):
        batch = (
            f" at a global batch of {mem['global_batch_size']:,} sequences, not the {lay['global_batch_size']:,} "
            "this layout meets (data parallelism alone rounds it up to a multiple of the devices)"
        )
    path.write_text(
        "The searched layout needs tensor / pipeline parallelism or selective recomputation: the trainer does "
        f"not run TP/PP, so the emitted config keeps the trainer's data-parallel layout (the plan's `memory`){batch}.\n"
        + "\n".join(format_layout({**lay, "performance": plan.get("performance")}))
        + "\n"
    )
    plan["emitted_layout"] = str(path)
    plan.setdefault("warnings", []).append(
        f"the searched layout ({lay['describe']}) needs TP/PP, which the trainer does not run: {path} holds its "
        f"table; {config} is the trainer's data-parallel layout{batch}"
        + ("" if mem.get("fits") else ", which does not fit this device")
    )
