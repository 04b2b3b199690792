"""A run in stages priced per stage: `--stages "14.8e12@8192,0.8e12@131072"` (tokens@sequence length, in
order), e.g. pre-training and a long-context extension. Each stage is the given model at its own sequence
length (FLOPs per token grow with it: the attention term), laid out anew by the layout search for the same
global batch in tokens, and priced at its predicted MFU (or `--mfu X` for every stage). The plan's `stages`
lists them; the run's tokens, compute and cost are their sums (its MFU the FLOP-weighted one). Torch-free.
"""

from __future__ import annotations

from typing import Any

from scaling.core.errors import InputError
from scaling.planning.layout_plan import layout_sections


def parse_stages(text: str) -> list[tuple[float, int]]:
    """'14.8e12@8192,0.8e12@131072' -> [(tokens, seq_len), ...]; InputError naming the bad item."""
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        tokens, at, seq = item.partition("@")
        try:
            t, s = float(tokens), int(seq)
        except ValueError:
            raise InputError(f"--stages {item!r}: write TOKENS@SEQ_LEN, e.g. 14.8e12@8192,0.8e12@131072") from None
        if not at or not t > 0 or s < 1:
            raise InputError(f"--stages {item!r}: tokens must be > 0 and the sequence length >= 1")
        out.append((t, s))
    if not out:
        raise InputError("--stages: give at least one TOKENS@SEQ_LEN")
    return out


def stage_sections(plan: dict, hw, stages: list[tuple[float, int]], opts, mfu_given: float | None) -> list[dict]:
    """One priced entry per stage (module docstring)."""
    from models.accounting import model_counts  # deferred: pydantic (a fast --help)
    from scaling.planning.layout import model_config

    run = plan["run"]
    batch = opts.global_batch_tokens or run.get("batch_tokens")
    out = []
    for i, (tokens, seq) in enumerate(stages):
        staged = {**plan, "run": {**run, "seq_len": seq, "tokens": tokens, "batch_tokens": batch}}
        cfg = model_config(run["model"], plan.get("vocab_size"), seq)
        fpt = model_counts(cfg).flops_per_token
        entry: dict[str, Any] = {
            "stage": i + 1,
            "tokens": tokens,
            "seq_len": seq,
            "flops_per_token": fpt,
            "hardware_flops": fpt * tokens,
        }
        got = layout_sections(
            staged,
            hw.device,
            hw.num_devices,
            hw.precision,
            devices_per_node=opts.devices_per_node,
            layout=opts.layout,
            micro_batch_size=opts.micro_batch_size,
            global_batch_tokens=batch,
        )
        layout, perf = got if got else (None, None)
        if layout is not None:
            entry["layout"] = layout.get("describe") or layout.get("reason")
            entry["layout_fits"] = bool(layout.get("fits"))
        mfu: float | None = mfu_given if mfu_given is not None else (perf or {}).get("mfu")
        if mfu is None:
            raise InputError(
                f"--stages: stage {i + 1} ({tokens:.3g} tokens at {seq}) has no layout that fits "
                f"({(layout or {}).get('reason')}) and no --mfu to price it at"
            )
        hours = fpt * tokens / (hw.peak * mfu * 3600.0)
        entry.update(
            mfu=mfu,
            mfu_source="given (--mfu)" if mfu_given is not None else "predicted (step-time model)",
            device_hours=hours,
            days=hours / 24.0 / hw.num_devices,
        )
        if perf:
            entry["tokens_per_s"] = perf["tokens_per_s"]
            entry["step_time_s"] = perf["step_time_s"]
        out.append(entry)
    return out


def format_stages(stages: list[dict]) -> list[str]:
    lines = ["stages (priced per stage):"]
    for s in stages:
        lines.append(
            f"  {s['stage']}. {s['tokens']:.4g} tokens at sequence length {s['seq_len']:,}: {s['flops_per_token']:.4g} "
            f"FLOPs/token, MFU {s['mfu']:.3f} ({s['mfu_source']}), {s['device_hours']:,.4g} device-hours, "
            f"{s['days']:.3g} days" + (f"; layout {s['layout']}" if s.get("layout") else "")
        )
    total = sum(s["device_hours"] for s in stages)
    lines.append(f"  total: {sum(s['tokens'] for s in stages):.4g} tokens, {total:,.4g} device-hours")
    return lines
