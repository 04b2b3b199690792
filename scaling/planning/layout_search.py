"""The layout a cluster engineer would pick: search tp x pp x dp x ep_size, zero_stage, micro_batch_size,
gradient accumulation, activation_checkpointing and pipeline interleaving for a global batch met
exactly, and keep the fastest by the step-time model (scaling/planning/perf_model.py) among those whose
memory (models/layout_memory.py) fits the device with headroom. Torch-free.

Searched: tp over powers of two up to --devices-per-node dividing the heads; cp (context parallel, ring
attention) over powers of two keeping chunks of at least 8,192 tokens, for sequences of 16,384 and more;
pp over the divisors of devices / (tp cp) up to the layers; dp = devices / (tp cp pp), which must divide
the global batch in sequences
(the batch is never rounded: a split that does not divide it is rejected, "batch"); ep_size over the
powers of two dividing dp and the experts (MoE only); zero_stage 0-3 (0-1 with pp > 1, as Megatron's
distributed optimizer and DeepSpeed's pipeline engine allow); micro_batch_size over the divisors of the
per-replica batch up to 64; activation_checkpointing none, selective (with tp or pp), every_k (k 4, 2),
full; pp_interleave 1, 2, 4, 8 chunks per device (with pp > 1, when the micro-batches are a multiple of
pp). `--layout key=value,...` fixes any of these (LAYOUT_KEYS). The result names the chosen layout and
the best few rejected ones with the reason: "memory" (faster but over the device's memory), "slower"
(fits, slower: by which component), "batch" and "trainer" (faster, not run by the trainer). A layout the
trainer runs (data parallel, ZeRO, its checkpointing) is preferred when it is at most 2% slower than the
fastest (`choice` says which rule chose).
"""

from __future__ import annotations

import math
from dataclasses import fields

from models.config import ModelConfig
from models.layout_memory import CHECKPOINTING, GIB, LAYOUT_KEYS, ParallelLayout, check_layout, layout_memory
from rundir.accelerators import MEMORY_BYTES
from scaling.core.errors import InputError
from scaling.planning.perf_model import CALIBRATION, Calibration, _Block, calibration_dict, machine, step_time

MAX_MICRO_BATCH = 64
LONG_CONTEXT_CHUNK = 8192  # context parallel is searched for sequences of at least 2 x this, in chunks >= it
TRAINER_PREFERENCE = 0.02  # a layout the trainer runs is chosen when at most this much slower than the fastest
CHECKPOINT_CHOICES = (("none", None), ("selective", None), ("every_k", 4), ("every_k", 2), ("full", None))
INTERLEAVE = (1, 2, 4, 8)
_TYPES = {f.name: f.type for f in fields(ParallelLayout)}


def parse_layout(text: str | None) -> dict:
    """`--layout zero_stage=3,tp=8,...` as typed values; InputError naming the key and what is allowed."""
    out: dict = {}
    if not text:
        return out
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not value:
            raise InputError(f"--layout {item!r}: write key=value (keys: {', '.join(LAYOUT_KEYS)})")
        if key not in LAYOUT_KEYS:
            raise InputError(f"--layout: unknown key {key!r} (keys: {', '.join(LAYOUT_KEYS)})")
        if key == "activation_checkpointing":
            if value not in CHECKPOINTING:
                raise InputError(f"--layout activation_checkpointing={value!r}: choose from {', '.join(CHECKPOINTING)}")
            out[key] = value
        elif key == "sequence_parallel":
            if value.lower() not in ("true", "false", "1", "0"):
                raise InputError(f"--layout sequence_parallel={value!r}: true or false")
            out[key] = value.lower() in ("true", "1")
        else:
            try:
                out[key] = int(value)
            except ValueError:
                raise InputError(f"--layout {key}={value!r}: a whole number") from None
            if out[key] < (0 if key == "zero_stage" else 1):
                raise InputError(f"--layout {key}={value}: must be >= {0 if key == 'zero_stage' else 1}")
            if key == "zero_stage" and out[key] > 3:
                raise InputError(f"--layout zero_stage={value}: 0-3")
    return out


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _candidates(
    cfg: ModelConfig, world: int, batch: int, dpn: int, fixed: dict, batch_rejects: list, split_rejects: list
):
    L, heads = cfg.n_layers, cfg.n_heads
    tps = [fixed["tp"]] if "tp" in fixed else [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= dpn and heads % t == 0]
    s = cfg.seq_len
    if "cp" in fixed:
        cps = [fixed["cp"]]
    else:  # context parallelism only for long sequences (Llama 3 used it from 128K; Megatron needs s % 2cp == 0)
        cps = [1] + (
            [c for c in (2, 4, 8, 16, 32) if s // c >= LONG_CONTEXT_CHUNK and s % (2 * c) == 0]
            if s >= 2 * LONG_CONTEXT_CHUNK
            else []
        )
    for tp, cp in ((t, c) for t in tps for c in cps):
        if world % (tp * cp):
            continue
        mp = tp * cp
        pps = [fixed["pp"]] if "pp" in fixed else [p for p in _divisors(world // mp) if p <= L]
        for pp in pps:
            if (world // mp) % pp:
                continue
            dp = world // (mp * pp)
            if "dp" in fixed and fixed["dp"] != dp:
                continue
            if batch % dp:
                batch_rejects.append(
                    {
                        "layout": {"tp": tp, "cp": cp, "pp": pp, "dp": dp},
                        "kind": "batch",
                        "reason": f"batch: dp={dp} does not divide the global batch of {batch} sequences",
                    }
                )
                continue
            per = batch // dp
            if "micro_batch_size" in fixed:
                mbs = [fixed["micro_batch_size"]]
            elif "gradient_accumulation_steps" in fixed:
                g = fixed["gradient_accumulation_steps"]
                mbs = [per // g] if per % g == 0 else []
                if per % g:
                    split_rejects.append(
                        f"gradient_accumulation_steps={g} does not divide the {per} sequences per data-parallel "
                        f"rank (the global batch of {batch} over dp={dp} at tp={tp}, cp={cp}, pp={pp})"
                    )
            else:
                mbs = [m for m in _divisors(per) if m <= MAX_MICRO_BATCH]
            moe = cfg.moe
            if "ep_size" in fixed:
                eps = [fixed["ep_size"]]
            elif moe is None:
                eps = [1]
            else:
                eps = [e for e in (1, 2, 4, 8, 16, 32, 64, 128, 256) if dp % e == 0 and moe.num_experts % e == 0]
            zeros = [fixed["zero_stage"]] if "zero_stage" in fixed else ([0, 1, 2, 3] if pp == 1 else [0, 1])
            if "activation_checkpointing" in fixed:
                ck = fixed["activation_checkpointing"]
                ks = (
                    [fixed.get("activation_checkpointing_k") or 2]
                    if ck == "every_k" and "activation_checkpointing_k" not in fixed
                    else [fixed.get("activation_checkpointing_k")]
                )
                if ck == "every_k" and "activation_checkpointing_k" not in fixed:
                    ks = [4, 2]
                cks = [(ck, k) for k in ks]
            else:
                cks = [c for c in CHECKPOINT_CHOICES if c[0] != "selective" or tp > 1 or pp > 1]
            sp = fixed.get("sequence_parallel", True)
            for mb in mbs:
                if mb < 1 or per % mb:
                    split_rejects.append(
                        f"micro_batch_size={mb} does not divide the {per} sequences per data-parallel rank "
                        f"(the global batch of {batch} over dp={dp} at tp={tp}, cp={cp}, pp={pp})"
                    )
                    continue
                gas = per // mb
                if "gradient_accumulation_steps" in fixed and fixed["gradient_accumulation_steps"] != gas:
                    split_rejects.append(
                        f"gradient_accumulation_steps={fixed['gradient_accumulation_steps']}: dp={dp} (tp={tp}, "
                        f"cp={cp}, pp={pp}) with micro_batch_size={mb} makes {gas} for the global batch of {batch}"
                    )
                    continue
                if "pp_interleave" in fixed:
                    vs = [fixed["pp_interleave"]]
                elif pp == 1:
                    vs = [1]
                else:
                    vs = [v for v in INTERLEAVE if v == 1 or (v <= math.ceil(L / pp) and gas % pp == 0)]
                for ep in eps:
                    for z in zeros:
                        for ck, k in cks:
                            for v in vs:
                                yield ParallelLayout(
                                    tp=tp,
                                    cp=cp,
                                    pp=pp,
                                    dp=dp,
                                    ep_size=ep,
                                    zero_stage=z,
                                    micro_batch_size=mb,
                                    gradient_accumulation_steps=gas,
                                    activation_checkpointing=ck,
                                    activation_checkpointing_k=k,
                                    sequence_parallel=sp,
                                    pp_interleave=v,
                                )


def nearest_batches(batch: int, dps: list[int]) -> list[int]:
    """The global batches (sequences) nearest `batch` below and above that one of the data-parallel sizes
    `dps` divides: what to ask for when no split meets `batch` exactly."""
    below = [batch // d * d for d in dps if batch // d >= 1]
    above = [-(-batch // d) * d for d in dps]
    return sorted({b for b in (max(below, default=0), min(above, default=0)) if b > 0})


def _slower_reason(perf: dict, best: dict) -> str:
    diff = {k: perf["breakdown_s"][k] - best["breakdown_s"][k] for k in perf["breakdown_s"]}
    worst = sorted(((v, k) for k, v in diff.items() if v > 0), reverse=True)[:2]
    what = ", ".join(f"{k} +{v:.3g} s" for v, k in worst) or "no single component"
    return f"slower: {perf['step_time_s']:.4g} s per step against {best['step_time_s']:.4g} s ({what})"


def search(
    cfg: ModelConfig,
    *,
    num_devices: int,
    global_batch_size: int,
    device: str,
    precision: str = "bf16",
    devices_per_node: int = 8,
    fixed: dict | None = None,
    calibration: Calibration = CALIBRATION,
    keep_rejected: int = 3,
    memory_check: bool = True,
) -> dict:
    """The fastest layout that fits (module docstring) and the best few rejected ones.
    memory_check=False (a published run's stated layout) keeps the fastest even when our memory
    estimate says it does not fit. `model.mla`/`model.mtp_depth` (multi-head latent attention, multi-token
    prediction) are priced in memory and step time; the trainer builds neither."""
    fixed = dict(fixed or {})
    mem_bytes = MEMORY_BYTES.get(device)
    mach = machine(device, precision, devices_per_node)
    mem_precision = {"fp32": "fp32", "tf32": "fp32", "fp16": "fp16", "fp8": "fp8"}.get(precision, "bf16")
    block = _Block(cfg, mach, calibration)
    builds = not cfg.priced_only()  # the trainer builds the architecture
    batch_rejects: list = []
    split_rejects: list[str] = []  # a fixed micro-batch / accumulation that no split's per-rank batch allows
    fits: list[tuple[float, ParallelLayout, dict, dict]] = []  # (step seconds, layout, memory, performance)
    over: list[tuple[float, ParallelLayout, dict, dict]] = []
    searched = 0
    problems: list[str] = []
    for lay in _candidates(cfg, num_devices, global_batch_size, devices_per_node, fixed, batch_rejects, split_rejects):
        problem = check_layout(cfg, lay)
        if problem:
            problems.append(problem)
            continue
        searched += 1
        mem = layout_memory(cfg, lay, mem_precision, mem_bytes)
        perf = step_time(cfg, lay, mach, calibration, block)
        (fits if (mem["fits"] or not memory_check) else over).append((perf["step_time_s"], lay, mem, perf))
    fits.sort(key=lambda r: r[0])
    over.sort(key=lambda r: r[0])
    out: dict = {
        "searched": searched,
        "fixed": fixed,
        "global_batch_size": global_batch_size,
        "global_batch_tokens": global_batch_size * cfg.seq_len,
        "num_devices": num_devices,
        "devices_per_node": devices_per_node,
        "nodes": num_devices // devices_per_node if num_devices % devices_per_node == 0 else None,
        "device": device,
        "precision": precision,
        "calibration": calibration_dict(calibration),
    }
    if not fits:
        out["fits"] = False
        if over:
            _, lay, mem, perf = min(over, key=lambda r: r[2]["per_device_bytes"]["total"])
            need = mem["per_device_bytes"]["total"] / GIB
            usable = (1 - mem["headroom"]) * (mem_bytes or 0) / GIB
            out["reason"] = (
                f"no layout fits: the leanest searched ({lay.describe()}) needs {need:.1f} GiB per device, "
                f"{usable:.1f} GiB usable"
            )
        elif batch_rejects:
            out["reason"] = (
                f"no split of {num_devices} devices has a data-parallel size dividing the global batch of "
                f"{global_batch_size} sequences" + (" with the --layout given" if fixed else "")
            )
            near = nearest_batches(global_batch_size, [r["layout"]["dp"] for r in batch_rejects])
            if near:
                out["nearest_global_batch_sizes"] = near
                out["reason"] += "; the nearest batches a split meets: " + " or ".join(
                    f"{b:,} sequences ({b * cfg.seq_len:,} tokens)" for b in near
                )
        else:
            out["reason"] = "no layout matches " + (
                f"--layout {fixed}: {problems[0]}" if problems else f"--layout {fixed}"
            )
        if fixed and not searched:  # the --layout given cannot be laid out at all: bad input, not a plan
            spec = ",".join(f"{k}={v}" for k, v in fixed.items())
            if problems:
                out["layout_error"] = f"--layout {spec}: {problems[0]}"
            elif batch_rejects:
                out["layout_error"] = f"--layout {spec}: {batch_rejects[0]['reason']}"
            elif split_rejects:
                out["layout_error"] = f"--layout {spec}: {split_rejects[0]}"
            else:
                out["layout_error"] = (
                    f"--layout {spec}: no split of the {num_devices} devices matches it (tp x cp x pp must divide "
                    "them; dp is what is left)"
                )
        out["rejected"] = _rejected(over, [], batch_rejects, None, keep_rejected, mem_bytes)
        return out
    # a layout the trainer runs wins when it is within TRAINER_PREFERENCE of the fastest: the run can then be
    # emitted and dry-run as planned
    runnable = next((r for r in fits if r[1].trainer_runs and precision != "fp8" and builds), None)
    if runnable is not None and runnable is not fits[0] and runnable[0] <= (1 + TRAINER_PREFERENCE) * fits[0][0]:
        fits.remove(runnable)
        fits.insert(0, runnable)
        out["choice"] = (
            f"the fastest layout the trainer runs, within {TRAINER_PREFERENCE:.0%} of the fastest "
            f"({fits[1][0]:.4g} s per step)"
        )
    else:
        out["choice"] = "the fastest layout that fits"
    best_t, lay, mem, perf = fits[0]
    out.update(
        fits=True,
        chosen=lay.to_dict(),
        describe=lay.describe(),
        engine=mem["engine"],
        trainer_runs=lay.trainer_runs and precision != "fp8" and builds,
        memory=mem,
        performance=perf,
        rejected=_rejected(over, fits[1:], batch_rejects, perf, keep_rejected, mem_bytes),
    )
    return out


def _rejected(over, slower, batch_rejects, best_perf, keep, mem_bytes) -> list[dict]:
    out = []
    usable = (1 - 0.05) * (mem_bytes or 0) / GIB
    for t, lay, mem, _ in over[:keep]:
        if best_perf is not None and t >= best_perf["step_time_s"]:
            break
        out.append(
            {
                "layout": lay.to_dict(),
                "describe": lay.describe(),
                "kind": "memory",
                "step_time_s": t,
                "reason": f"memory: {mem['per_device_bytes']['total'] / GIB:.1f} GiB per device, "
                f"{usable:.1f} GiB usable",
            }
        )
    if best_perf is not None:
        for t, lay, _, perf in slower[:keep]:
            faster = t < best_perf["step_time_s"]
            out.append(
                {
                    "layout": lay.to_dict(),
                    "describe": lay.describe(),
                    "kind": "trainer" if faster else "slower",
                    "step_time_s": t,
                    "reason": (
                        f"trainer: {t:.4g} s per step, {1 - t / best_perf['step_time_s']:.1%} faster, but the "
                        "trainer does not run it (a layout it runs within 2% is preferred)"
                    )
                    if faster
                    else _slower_reason(perf, best_perf),
                }
            )
    out += batch_rejects[: min(keep, 2)]
    return out


def format_layout(block: dict) -> list[str]:
    """The printed `layout` and `performance` sections."""
    lines = []
    if not block.get("fits"):
        lines.append(f"layout search: {block.get('reason')}")
    else:
        b = block["memory"]["per_device_bytes"]
        mem = block["memory"]
        lines.append(
            f"layout (searched over {block['searched']:,} for a global batch of {block['global_batch_size']:,} "
            f"sequences = {block['global_batch_tokens']:,} tokens, met exactly; {block.get('choice')}): "
            f"{block['describe']}"
        )
        lines.append(
            f"  engine: {block['engine']}; memory {b['total'] / GIB:.1f} GiB of "
            f"{(mem['device_memory_bytes'] or 0) / GIB:.0f} GiB per device (params {b['params'] / GIB:.1f}, grads "
            f"{b['grads'] / GIB:.1f}, optimizer {b['optimizer'] / GIB:.1f}, activations {b['activations'] / GIB:.1f}, "
            f"other {b['other'] / GIB:.1f})"
        )
        if not block.get("trainer_runs"):
            lines.append(
                "  the trainer does not run TP/PP, selective recomputation, fp8, MLA or MTP: this layout prices the run"
            )
        p = block["performance"]
        bd = ", ".join(f"{k} {v:.3g}" for k, v in p["breakdown_s"].items() if v > 0)
        lines.append(
            f"performance (predicted): step {p['step_time_s']:.4g} s ({bd}); {p['tokens_per_s']:.4g} tokens/s "
            f"({p['tokens_per_s_per_device']:.4g} per device); MFU {p['mfu']:.3f}, HFU {p['hfu']:.3f} "
            f"(model FLOPs {p['model_flops_per_token']:.4g}/token, hardware FLOPs with recomputation "
            f"{p['hardware_flops_per_token']:.4g}/token)"
        )
    for r in block.get("rejected") or []:
        what = r.get("describe") or ", ".join(f"{k}={v}" for k, v in r["layout"].items())
        lines.append(f"  rejected: {what}: {r['reason']}")
    return lines


__all__ = ["format_layout", "nearest_batches", "parse_layout", "search"]
