"""`scalelab train CONFIG --dry-run [--world-size K] [--device NAME]`: check a run without running it.

Validates the config and, for K ranks, the DeepSpeed config the trainer would hand DeepSpeed
(pretrain/engine/ds_config.py, parsed by DeepSpeed's own `DeepSpeedConfig` at that world size); builds the
model on the meta device (no memory: a 70B config takes seconds) and checks its parameter count
against models/accounting.py; prints the parameters, FLOPs per token, the layout and the per-rank
memory estimate (models/memory.py), and whether it fits a device of the table (rundir/accelerators.py).
Creates no process group, prepares no data, writes nothing. A bad config exits 2 naming the key.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pydantic

from models.accounting import model_counts
from models.memory import choose_layout, estimate_memory
from pretrain.config.loader import check_trainer_builds, load_train_config
from pretrain.data.mixture import planned_vocab
from pretrain.data.prepared import META_FILE
from pretrain.engine.ds_config import build_ds_config, engine_zero_stage, grad_accum_steps
from pretrain.errors import ConfigError
from rundir.accelerators import MEMORY_BYTES

GIB = 1 << 30


def resolve_vocab(cfg) -> tuple[int, str]:
    """(vocab size, where it came from) without preparing data: the config, the prepared data's meta
    (read only), or the tokenizer config."""
    if cfg.model.vocab_size:
        return cfg.model.vocab_size, "model.vocab_size"
    data = cfg.data
    if data.mixture is not None:
        v = planned_vocab(data)
        if v:
            return v, "the mixture's tokenizer"
    else:
        from pretrain.data.prepare import output_dir  # deferred: imports tokenizers

        meta = output_dir(data) / META_FILE
        try:
            return int(json.loads(meta.read_text())["vocab_size"]), f"the prepared data ({meta.parent})"
        except (OSError, ValueError, KeyError, TypeError):
            pass
        tok = data.tokenizer
        if tok.kind == "gpt2":
            return 50257, "data.tokenizer.kind gpt2"
        if tok.kind == "bpe":
            return tok.vocab_size, "data.tokenizer.vocab_size (a BPE's target; the trained one can be smaller)"
    raise ConfigError(
        "invalid configuration:\n  model.vocab_size: not set and the data is not prepared; "
        "give it for --dry-run (e.g. model.vocab_size=32000)"
    )


def check_deepspeed(ds: dict, world_size: int) -> None:
    """DeepSpeed's own parse of the config at `world_size` ranks (batch arithmetic, ZeRO and precision
    sections), without a process group."""
    from deepspeed.runtime.config import DeepSpeedConfig  # deferred: imports deepspeed

    class AtWorldSize(DeepSpeedConfig):
        def _configure_train_batch_size(self):
            self.world_size = world_size  # not the (absent) process group's
            super()._configure_train_batch_size()

    try:
        AtWorldSize(copy.deepcopy(ds))
    except (AssertionError, ValueError, KeyError, TypeError, pydantic.ValidationError) as exc:
        raise ConfigError(
            f"invalid configuration:\n  deepspeed: DeepSpeed rejects the config for {world_size} rank(s): {exc}"
        ) from None


def meta_param_count(model_cfg) -> int:
    """Parameters of the model built on the meta device (tied weights once)."""
    import torch  # deferred: imports torch

    from models.gpt import GPT  # deferred: imports torch

    with torch.device("meta"):
        model = GPT(model_cfg)
    seen: dict[int, int] = {}
    for p in model.parameters():
        seen[id(p)] = p.numel()
    return sum(seen.values())


def host_memory_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise OSError("no MemTotal in /proc/meminfo")


def device_memory(device: str | None, precision: str, world_size: int) -> tuple[str, int | None, str]:
    """(cuda|cpu, bytes per rank or None, what they are). No --device: fp32 runs are CPU runs (this
    host), bf16/fp16 runs GPU runs of unknown memory."""

    if device == "cpu" or (device is None and precision == "fp32"):
        return "cpu", host_memory_bytes() // world_size, f"this host's memory shared by {world_size} rank(s)"
    if device is None:
        return "cuda", None, "no --device given, so the fit is not checked"
    return "cuda", MEMORY_BYTES[device], f"{device} memory ({MEMORY_BYTES[device] / GIB:.0f} GiB)"


def dry_run(config: str, overrides: list[str], world_size: int | None, device: str | None) -> int:

    cfg = load_train_config(config, overrides)
    check_trainer_builds(cfg)
    world = world_size or int(os.environ.get("WORLD_SIZE", "1"))
    gas = grad_accum_steps(cfg, world)
    vocab, vocab_from = resolve_vocab(cfg)
    model_cfg = cfg.model.model_copy(update={"vocab_size": vocab})
    counts = model_counts(model_cfg)
    built = meta_param_count(model_cfg)
    if built != counts.total:
        raise AssertionError(
            f"the model built on the meta device has {built:,} parameters, models/accounting.py counts {counts.total:,}"
        )
    kind, mem, mem_note = device_memory(device, cfg.precision, world)
    ds = build_ds_config(cfg, world, cuda=kind == "cuda")
    check_deepspeed(ds, world)
    zero = ds.get("zero_optimization", {})
    est = estimate_memory(
        model_cfg,
        micro_batch_size=cfg.train.micro_batch_size,
        zero_stage=cfg.deepspeed.zero_stage,
        world_size=world,
        precision=cfg.precision,
        optimizer=cfg.optim.name,
        activation_checkpointing=cfg.train.activation_checkpointing,
        activation_checkpointing_k=cfg.train.activation_checkpointing_k,
        gradient_accumulation_steps=gas,
        device=kind,
        device_memory_bytes=mem,
        reduce_bucket_size=zero.get("reduce_bucket_size"),
    )
    m = model_cfg
    b = est.per_device_bytes
    print(f"dry run of {config} ({cfg.name}): config and DeepSpeed config valid for {world} rank(s); nothing was run")
    print(
        f"model: d_model {m.d_model}, n_layers {m.n_layers}, n_heads {m.n_heads}, n_kv_heads {m.kv_heads}, "
        f"d_ff {m.ffn_dim}, vocab {vocab} (from {vocab_from}), seq_len {m.seq_len}"
        + (", MoE" if getattr(m, "moe", None) is not None else "")
    )
    print(
        f"parameters: total {counts.total:,}  non-embedding {counts.non_embedding:,}  active {counts.active:,} "
        f"(built on the meta device: {built:,})"
    )
    tokens = cfg.total_steps() * cfg.tokens_per_step()
    print(
        f"training FLOPs per token: {counts.flops_per_token:.4g}; {cfg.total_steps():,} steps of "
        f"{cfg.tokens_per_step():,} tokens = {counts.flops_per_token * tokens:.4g} FLOPs"
    )
    ac = cfg.train.activation_checkpointing + (
        f" (k={cfg.train.activation_checkpointing_k})" if cfg.train.activation_checkpointing == "every_k" else ""
    )
    print(
        f"layout: {world} rank(s), ZeRO-{cfg.deepspeed.zero_stage} "
        f"(DeepSpeed engine stage {engine_zero_stage(cfg)}), "
        f"{cfg.precision}, optim {cfg.optim.name}, micro-batch {cfg.train.micro_batch_size} x {gas} accumulation "
        f"step(s) = global batch {cfg.train.global_batch_size}, activation checkpointing {ac}"
    )
    print("memory per rank (GiB): " + ", ".join(f"{k} {v / GIB:.2f}" for k, v in b.items()) + f" [{kind}]")
    if est.fits is None:
        print(f"fit: {mem_note}")
    else:
        print(f"fit: {'yes' if est.fits else 'NO'}: {b['total'] / GIB:.2f} GiB of {mem_note}")
    for note in est.notes:
        print(f"note: {note}")
    if est.fits is False and kind == "cuda":
        lay = choose_layout(
            model_cfg,
            global_batch_size=cfg.train.global_batch_size,
            device_memory_bytes=mem,
            nodes=1,
            devices_per_node=world,
            precision=cfg.precision,
            optimizer=cfg.optim.name,
        )
        if lay.fits:
            e = lay.estimate
            print(
                f"a layout that fits: ZeRO-{e.zero_stage}, micro-batch {e.micro_batch_size} x "
                f"{e.gradient_accumulation_steps}, activation checkpointing {e.activation_checkpointing}"
                + (f" (k={e.activation_checkpointing_k})" if e.activation_checkpointing_k else "")
                + f": {e.per_device_bytes['total'] / GIB:.2f} GiB"
            )
        else:
            print(f"no layout fits on {world} device(s): {lay.reason}")
    return 0
