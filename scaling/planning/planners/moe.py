"""The MoE law plans alone: a `scalelab fit moe` record gives the best (N_active, E, G, D) at --compute and
the dense optimum beside it (scaling.planning.moe_plan), and --emit-config its MoE train config
(scaling.planning.moe_run); the budget forms that need a device or inference tokens are the dense plan's."""

from __future__ import annotations

from typing import Any

from scaling.core.errors import InputError
from scaling.planning.planner import Planner, register_planner


def plan_moe(fits: list, args: Any):
    """The MoE plan of the one record in `fits` for `args.compute` (`scalelab plan`'s parsed options)."""
    from scaling.planning.moe_plan import make_moe_plan  # deferred: numpy (a fast --help)
    from scaling.planning.moe_run import emit_moe_config  # deferred: numpy (a fast --help)

    if len(fits) != 1:
        raise InputError(f"an MoE plan takes exactly one fit record (the `scalelab fit moe` one); got {len(fits)}")
    other = [
        f"--{k.replace('_', '-')}"
        for k in ("budget_usd", "device_hours", "days", "target_loss", "inference_tokens", "device")
        if getattr(args, k, None) is not None
    ]
    if other or args.compute is None:
        raise InputError(
            "an MoE plan takes --compute C (FLOPs in the fit's 6ND_active_nonembed convention)"
            + (f"; {', '.join(other)} apply to dense plans only" if other else "")
        )
    plan = make_moe_plan(
        fits[0],
        args.compute,
        ci=args.ci,
        compute_kind=args.compute_kind,
        vocab_size=args.vocab_size,
        presets_only=args.presets_only,
        shape_rule=args.shape_rule,
    )
    if args.emit_config:
        emit_moe_config(plan, args.emit_config, micro_batch_size=args.micro_batch_size or 16)
        plan["emitted_config"] = args.emit_config
    return plan


def format_moe(plan) -> str:
    from scaling.planning.moe_plan import format_moe_plan  # deferred: numpy (a fast --help)

    return format_moe_plan(plan)


PLANNER = register_planner(Planner(law="moe", alone=plan_moe, format=format_moe))
