"""The planned run's memory and layout on the plan's device (models.memory), torch-free.

The global batch laid out: the batch-lr fit's batch at the run when the plan has one, else the
fitted runs' own global batch (their recipe), else DEFAULT_BATCH_TOKENS; in whole sequences,
rounded up to a multiple of the devices. The layout is `models.memory.choose_layout`'s: the
smallest ZeRO stage, then the largest micro-batch that fits with headroom, activation
checkpointing only when nothing fits without it, gradient accumulation to the global batch.
Nodes: --devices-per-node (default 8, the usual GPU node) when it divides the device count.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml
from pydantic import ValidationError

from base.config_files import format_validation_error
from models.accounting import model_counts
from models.config import ModelConfig
from models.memory import choose_layout
from rundir.accelerators import MEMORY_BYTES
from scaling.core.errors import InputError
from scaling.planning.run_model import configs_dir

DEFAULT_BATCH_TOKENS = 4 * 2**20  # 4M tokens: Llama 2's and Llama 3's batch (Touvron et al. 2023; Dubey et al. 2024)
DEFAULT_DEVICES_PER_NODE = 8
# the memory estimate's precision for a peak-FLOPs precision (fp8: the trainer's bf16 layout; the fp8 one is
# scaling/planning/layout_search.py's)
MEMORY_PRECISION = {"tf32": "fp32", "fp8": "bf16"}


def nodes_for(num_devices: int, devices_per_node: int | None) -> tuple[int, int]:
    """(nodes, devices per node) for K devices."""
    per = devices_per_node or DEFAULT_DEVICES_PER_NODE
    if devices_per_node and num_devices % per:
        raise InputError(f"--devices-per-node {per} does not divide --num-devices {num_devices}")
    if num_devices % per:
        per = num_devices if num_devices < per else math.gcd(num_devices, per)
    return num_devices // per, per


def batch_sequences(plan: dict, seq_len: int, world: int, tokens: float | None = None) -> tuple[int, str]:
    """The global batch in sequences (a multiple of `world`) and where it came from (`tokens`:
    --global-batch-tokens, the same target as the layout search's)."""
    run = plan.get("run") or {}
    settings = (plan.get("recipe") or {}).get("settings") or {}
    if tokens:
        source = "--global-batch-tokens"
    elif run.get("batch_tokens"):
        tokens, source = float(run["batch_tokens"]), "the batch-lr fit at this run"
    elif settings.get("train.global_batch_size"):
        tokens = float(settings["train.global_batch_size"]) * seq_len
        source = "the fitted runs' global batch"
    else:
        tokens, source = (
            float(DEFAULT_BATCH_TOKENS),
            f"default {DEFAULT_BATCH_TOKENS / 2**20:g}M tokens (Llama 2/3's batch)",
        )
    seqs = max(1, round(tokens / seq_len))
    rounded = world * math.ceil(seqs / world)
    if rounded != seqs:
        source += f", {seqs} sequences rounded up to {rounded} (a multiple of the {world} devices)"
    return rounded, source


def layout_block(
    plan: dict,
    device: str,
    num_devices: int,
    precision: str,
    *,
    devices_per_node: int | None = None,
    optimizer: str | None = None,
    global_batch_tokens: float | None = None,
) -> dict | None:
    """The plan's `memory` section for its run on `num_devices` x `device` (None without a run)."""
    run = plan.get("run")
    if not run or not run.get("model"):
        return None
    cfg = model_config(run["model"], plan.get("vocab_size"), run.get("seq_len"))
    unbuilt = cfg.priced_only()
    if unbuilt:  # the trainer's data-parallel layout prices only what the trainer builds
        return {
            "fits": None,
            "reason": f"{' and '.join(unbuilt)}: the trainer does not build {'them' if len(unbuilt) > 1 else 'it'}, "
            "so there is no trainer layout (the searched `layout` prices the run)",
        }
    nodes, per = nodes_for(num_devices, devices_per_node)
    seqs, source = batch_sequences(plan, cfg.seq_len, num_devices, global_batch_tokens)
    optimizer = optimizer or ((plan.get("recipe") or {}).get("settings") or {}).get("optim.name") or "adamw"
    mem = MEMORY_BYTES.get(device)
    if mem is None:
        return {"fits": None, "reason": f"no memory size for device {device}"}
    lay = choose_layout(
        cfg,
        global_batch_size=seqs,
        device_memory_bytes=mem,
        nodes=nodes,
        devices_per_node=per,
        precision=MEMORY_PRECISION.get(precision, precision),
        optimizer=optimizer,
        device="cuda",
    )
    out = lay.to_dict()
    out.update(global_batch_size=seqs, global_batch_tokens=seqs * cfg.seq_len, global_batch_source=source)
    return out


def model_config(model: dict, vocab_size: int | None, seq_len: int | None):
    """The run's ModelConfig: a designed mapping as is, a preset through configs/models/."""
    raw = {k: v for k, v in model.items() if k != "preset"}
    if model.get("preset"):
        path = configs_dir() / "models" / f"{model['preset']}.yaml"
        if not path.exists():
            raise InputError(f"model.preset {model['preset']!r}: no {path}")
        raw = (yaml.safe_load(path.read_text()) or {}) | raw
    raw.setdefault("vocab_size", vocab_size)
    if seq_len:
        raw["seq_len"] = seq_len
    if raw.get("vocab_size") is None:
        raise InputError("the planned model has no vocab size: give --vocab-size")
    return ModelConfig(**raw)


def format_memory(mem: dict) -> list[str]:
    gib = 2**30
    if mem.get("fits") is None and "per_device_bytes" not in mem:
        return [f"memory: {mem.get('reason')}"]
    b = mem["per_device_bytes"]
    lines = [
        f"memory per device: {b['total'] / gib:.1f} GiB of {mem['device_memory_bytes'] / gib:.0f} GiB "
        f"(params {b['params'] / gib:.1f}, grads {b['grads'] / gib:.1f}, optimizer {b['optimizer'] / gib:.1f}, "
        f"activations {b['activations'] / gib:.1f}, other {b['other'] / gib:.1f}; {mem['headroom']:.0%} headroom kept)"
    ]
    ckpt = mem["activation_checkpointing"] + (
        f" (k={mem['activation_checkpointing_k']})" if mem.get("activation_checkpointing_k") else ""
    )
    if mem["fits"]:
        lines.append(
            f"layout: {mem['nodes']} node(s) x {mem['devices_per_node']} devices, ZeRO-{mem['zero_stage']}, "
            f"micro-batch {mem['micro_batch_size']}, gradient accumulation {mem['gradient_accumulation_steps']}, "
            f"activation checkpointing {ckpt}; global batch {mem['global_batch_size']} sequences "
            f"({mem['global_batch_source']})"
        )
    else:
        lines.append(f"layout: does not fit: {mem['reason']}")
    return lines


def priced_model_plan(path: str, tokens: float, vocab_size: int | None) -> dict:
    """`plan --model CONFIG.yaml --tokens D`: a given model and token count as a plan (no fit): its
    FLOPs per token (trainer FLOPs, attention included) x D is the compute priced and laid out.
    CONFIG: a train config (its `model:` section) or a model file (`scalelab model design --out`)."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"--model {path}: cannot read it ({exc})") from exc
    if not isinstance(raw, dict):
        raise InputError(f"--model {path}: not a YAML mapping (a train config or a `model:` file)")
    model = raw.get("model") if isinstance(raw.get("model"), dict) else raw
    if isinstance(raw.get("model"), str):
        model = {"preset": raw["model"]}
    try:
        cfg = model_config(model, vocab_size or model.get("vocab_size"), None)
    except ValidationError as exc:
        raise InputError(f"--model {path}: {format_validation_error(exc, ModelConfig, 'model.')}") from exc
    c = model_counts(cfg)
    mapping = {
        k: getattr(cfg, k) for k in ("d_model", "n_layers", "n_heads", "vocab_size", "seq_len", "tie_embeddings")
    }
    mapping.update(
        n_kv_heads=cfg.kv_heads, d_ff=cfg.ffn_dim, moe=cfg.moe.model_dump(mode="json") if cfg.moe is not None else None
    )
    if cfg.priced_only():  # priced only (the trainer does not build them): kept for the layout search
        mapping.update(mla=cfg.mla.model_dump(mode="json") if cfg.mla else None, mtp_depth=cfg.mtp_depth)
    C = c.flops_per_token * float(tokens)
    run = {
        "preset": model.get("preset"),
        "shape_rule": None,
        "choice": f"given (--model {path})",
        "n_kind": "total",
        "N": c.total,
        "params": c.total,
        "non_embedding_params": c.non_embedding,
        "active_params": c.active,
        "flops_per_token": c.flops_per_token,
        "seq_len": cfg.seq_len,
        "tokens": float(tokens),
        "ratio_to_N_opt": None,
        "compute": {
            "trainer_flops": C,
            "6ND_total": 6.0 * c.total * tokens,
            "6ND_nonembed": 6.0 * c.non_embedding * tokens,
        },
        "model": mapping,
    }
    return {
        "compute": C,
        "conventions": {"compute": "trainer_flops", "n_kind": "total"},
        "n_kind": "total",
        "vocab_size": cfg.vocab_size,
        "run": run,
        "given_model": str(path),
        "warnings": [],
    }
