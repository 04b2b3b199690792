"""The MoE branch of `scalelab plan` (called by plan.py; `scalelab fit moe` is the MoE law family,
scaling/fits/moe/family.py).

Heavy imports happen inside the commands. Exit codes: 0 ok, 1 fit failed, 2 bad input.
"""

from __future__ import annotations

import sys

from scaling.cli.options import fail
from scaling.core.errors import InputError


def plan_moe(args, fits) -> int:
    """`scalelab plan` with an MoE fit record: --compute only (the device and inference forms are the dense plan's)."""
    # deferred: numpy, scipy, pandas (a fast --help)

    from scaling.planning.moe_plan import format_moe_plan, make_moe_plan  # deferred: numpy (a fast --help)
    from scaling.planning.moe_run import emit_moe_config  # deferred: numpy (a fast --help)

    try:
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
    except InputError as exc:
        return fail(str(exc), 2)
    if args.out:
        plan.save(args.out)
    print(plan.to_json() if args.json else format_moe_plan(plan))
    if args.emit_config:
        print(f"wrote {args.emit_config}", file=sys.stderr)
    return 0
