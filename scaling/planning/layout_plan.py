"""The plan's `layout` and `performance` sections: its run laid out on the plan's devices by the layout
search (scaling/planning/layout_search.py) for a global batch met exactly, and that layout's predicted
step time, tokens/s, MFU, days and device-hours (scaling/planning/perf_model.py). Torch-free.

The global batch: `--global-batch-tokens`, else the batch-lr fit's batch at the run, else the fitted
runs' global batch, else 4M tokens (scaling/planning/layout.py), in whole sequences and never rounded
to the device count. `--layout key=value,...` fixes layout keys; `--micro-batch-size` is
`--layout micro_batch_size=...`.
"""

from __future__ import annotations

from models.config import ModelConfig
from rundir.accelerators import NETWORK_BYTES_PER_S, NVLINK_BYTES_PER_S
from scaling.core.errors import InputError
from scaling.planning.layout import DEFAULT_BATCH_TOKENS, DEFAULT_DEVICES_PER_NODE, model_config
from scaling.planning.layout_search import parse_layout, search

PRICED_PRECISIONS = ("bf16", "fp16", "fp32", "tf32", "fp8")


def target_batch(plan: dict, seq_len: int, tokens: float | None) -> tuple[int, str]:
    """(global batch in sequences, where it came from), not rounded to the devices."""
    run = plan.get("run") or {}
    settings = (plan.get("recipe") or {}).get("settings") or {}
    if tokens:
        source = "--global-batch-tokens"
    elif run.get("batch_tokens"):
        tokens, source = float(run["batch_tokens"]), "the batch-lr fit at this run"
    elif settings.get("train.global_batch_size"):
        tokens, source = float(settings["train.global_batch_size"]) * seq_len, "the fitted runs' global batch"
    else:
        tokens, source = float(DEFAULT_BATCH_TOKENS), f"default {DEFAULT_BATCH_TOKENS / 2**20:g}M tokens"
    seqs = max(1, round(float(tokens) / seq_len))
    if seqs * seq_len != round(float(tokens)):
        source += f" ({float(tokens):.6g} tokens as {seqs} whole sequences of {seq_len})"
    return seqs, source


def trainer_memory(plan: dict, layout: dict, precision: str) -> dict | None:
    """The plan's `memory` section for a searched layout the trainer runs (data parallel, ZeRO, its
    checkpointing; AdamW), so that --emit-config and `train --dry-run` use it: models/memory.py's estimate
    with the layout's keys and its exact global batch. None when the layout needs what the trainer lacks."""
    from models.memory import estimate_memory  # deferred: pydantic (a fast --help)

    settings = (plan.get("recipe") or {}).get("settings") or {}
    if not layout.get("fits") or not layout.get("trainer_runs") or settings.get("optim.name") not in (None, "adamw"):
        return None
    c = layout["chosen"]
    if c["ep_size"] > 1:  # models/memory.py has no expert parallelism: the plan keeps its data-parallel layout
        return None
    run = plan["run"]
    cfg = model_config(run["model"], plan.get("vocab_size"), run.get("seq_len"))
    mem_precision = {"tf32": "fp32", "fp8": "bf16"}.get(precision, precision)
    est = estimate_memory(
        cfg,
        micro_batch_size=c["micro_batch_size"],
        zero_stage=c["zero_stage"],
        world_size=c["dp"],
        precision=mem_precision,
        activation_checkpointing=c["activation_checkpointing"],
        activation_checkpointing_k=c["activation_checkpointing_k"]
        if c["activation_checkpointing"] == "every_k"
        else None,
        gradient_accumulation_steps=c["gradient_accumulation_steps"],
        device_memory_bytes=layout["memory"]["device_memory_bytes"],
    )
    out = est.to_dict()
    out.update(
        nodes=layout["nodes"] or 1,
        devices_per_node=layout["devices_per_node"] if layout["nodes"] else c["dp"],
        reason=None,
        global_batch_size=layout["global_batch_size"],
        global_batch_tokens=layout["global_batch_tokens"],
        global_batch_source=layout["global_batch_source"] + ", the searched layout (met exactly)",
    )
    return out


def fixed_keys(layout: str | None, micro_batch_size: int | None) -> dict:
    fixed = parse_layout(layout)
    if micro_batch_size is not None:
        if "micro_batch_size" in fixed and fixed["micro_batch_size"] != micro_batch_size:
            raise InputError(
                f"--micro-batch-size {micro_batch_size} and --layout micro_batch_size={fixed['micro_batch_size']} "
                "disagree: give one"
            )
        fixed["micro_batch_size"] = micro_batch_size
    return fixed


def layout_sections(
    plan: dict,
    device: str,
    num_devices: int,
    precision: str,
    *,
    devices_per_node: int | None = None,
    layout: str | None = None,
    micro_batch_size: int | None = None,
    global_batch_tokens: float | None = None,
) -> tuple[dict, dict | None] | None:
    """(layout, performance) for the plan's run, None without a run or for a device the step-time
    model cannot price (no link bandwidths)."""
    run = plan.get("run")
    if not run or not run.get("model"):
        return None
    if device not in NVLINK_BYTES_PER_S or device not in NETWORK_BYTES_PER_S or precision not in PRICED_PRECISIONS:
        return None
    cfg: ModelConfig = model_config(run["model"], plan.get("vocab_size"), run.get("seq_len"))
    fixed = fixed_keys(layout, micro_batch_size)
    per = devices_per_node or min(DEFAULT_DEVICES_PER_NODE, num_devices)
    seqs, source = target_batch(plan, cfg.seq_len, global_batch_tokens)
    found = search(
        cfg,
        num_devices=num_devices,
        global_batch_size=seqs,
        device=device,
        precision=precision,
        devices_per_node=per,
        fixed=fixed,
    )
    if found.get("layout_error"):
        raise InputError(found["layout_error"])
    if global_batch_tokens and not found.get("searched") and found.get("nearest_global_batch_sizes"):
        # the batch the user asked for cannot be met on these devices: say which can, before any pricing
        raise InputError(f"{source}: {found['reason']}")
    found["global_batch_source"] = source
    perf = found.pop("performance", None)
    if perf is None:
        return found, None
    tokens = float(run.get("tokens") or 0)
    if tokens > 0:
        seconds = tokens / perf["tokens_per_s"]
        perf["days"] = seconds / 86400.0
        perf["device_hours"] = seconds / 3600.0 * num_devices
        perf["model_flops"] = perf["model_flops_per_token"] * tokens
        perf["hardware_flops_with_recompute"] = perf["hardware_flops_per_token"] * tokens
        perf["tokens"] = tokens
    perf["source"] = (
        "predicted by the step-time model (scaling/planning/perf_model.py) for the searched layout, "
        "calibrated on published throughput (docs/model-design.md)"
    )
    return found, perf
