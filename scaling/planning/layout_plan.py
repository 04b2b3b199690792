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
