"""Per-device memory of a training run, and the data-parallel layout that fits a device (torch-free).

`estimate_memory` adds up, per rank, in bytes:

- **model states** by ZeRO stage, precision and optimizer, on the engine pretrain/ builds
  (pretrain/engine/ds_config.py), with P parameters (tied ones once), N data-parallel ranks and LL the
  largest single module's own parameters (DeepSpeed's `largest_layer_params`):

    precision / stage   params            grads                     optimizer
    bf16  ZeRO-0        4P + 2P_mm        4P                        8P          fp32 weights, autocast bf16 copies
    bf16  ZeRO-1        2P                4P                        12P/N       DeepSpeed's BF16_Optimizer
    bf16  ZeRO-2        2P                6P/N                      12P/N       = estimate_zero2_...: 2P + 18P/N
    bf16  ZeRO-3        2P/N + 2LL        4P/N + 2LL                12P/N       = estimate_zero3_...: 18P/N + 4LL
    fp32  ZeRO-0        4P                4P                        8P
    fp32  ZeRO-1        4P                4P + 4P/N                 12P/N       ZeRO keeps an fp32 master copy
    fp32  ZeRO-2        4P                4P/N                      12P/N         even of fp32 weights
    fp32  ZeRO-3        4P/N + 4LL        4P/N + 4LL                12P/N
    fp16  ZeRO-0        2P                6P                        12P         FP16_Optimizer (fp32 master)
    fp16  ZeRO-1        2P                2P + 4P/N                 12P/N
    fp16  ZeRO-2/3      as bf16

  bf16 ZeRO-0 keeps fp32 weights (they are the master copy) and runs the forward under
  torch.autocast, whose cache holds a bf16 copy of every matmul weight (P_mm: all but the input
  embedding and norms) for the step. bf16 ZeRO-1 with fp32 gradient accumulation is DeepSpeed's
  BF16_Optimizer: a full fp32 gradient buffer and the fp32 master/moments sharded. bf16 ZeRO-2/3
  follow DeepSpeed's estimators exactly (tests/test_memory.py compares them): their 2P/N "16-bit
  gradients" of ZeRO-2 stand for the bucketed bf16 staging of our fp32 accumulation.
  `optim.name muon` runs DeepSpeed's ZeRO-0 engine (fp32 weights, autocast for bf16) whatever
  the ZeRO stage; Muon keeps one fp32 momentum per matrix it updates (the blocks' matrices and
  expert stacks) and AdamW two moments for the rest (embeddings, head, norms, routers); with
  zero_stage 1 each rank keeps the states of the whole tensors it owns (pretrain/optim/muon.py), about
  1/N of them plus at most the largest tensor's states for the imbalance.

- **activations** per layer for micro-batch b and sequence s (S = b·s tokens), counted from what
  our Llama layout saves for backward (after Korthikanti et al. 2022, "Reducing Activation
  Recomputation in Large Transformer Models", Sec. 4.1, whose 34·s·b·h + 5·a·s²·b bytes assume a
  GeLU MLP of 4h, dropout and a materialised s×s softmax). Kept, per token: each RMSNorm's input
  (fp32), normalised value and output (the projections' input; under autocast one bf16 copy per
  projection that reads it); the rotated q and k, v (GQA: n_kv·head_dim wide) and the attention
  output (o_proj reads it through a view); the SwiGLU gate, its SiLU, up and their product
  (4·d_ff); the attention kernel's log-sum-exp (fp32, one per head). Dropped: dropout (none), the
  s² score matrix (SDPA's flash / memory-efficient kernels on GPU and its flash kernel on CPU never
  keep it; fp32 CUDA with GQA expands K/V, which is added). Per token and layer, in bytes: fp32
  (8h + 2kv + 4f)·4; bf16 weights 20h + 4kv + 8f; bf16 autocast 30h + 4kv + 8f; each + 4a + 8.
  tests/test_memory.py checks these against the tensors autograd saves, byte for byte.
  Activation checkpointing (models/checkpointing.py) keeps only a checkpointed block's input and
  recomputes one block at a time in backward. The output layer: the loss keeps fp32 log-softmax
  of the logits, and the first steps of backward hold it with two more fp32 (S × vocab) buffers:
  12·S·V bytes at the peak (before any block's backward has freed anything). MoE layers keep the
  router logits and top_k expert copies of the FFN activations (an estimate, not measured); an MoE
  model's dense layers (first_dense_layers, every_k_layers) keep the dense FFN's.

- **other**: ZeRO's gradient reduce bucket (stage 1 fp32/fp16 and 2: reduce_bucket_size elements of
  the reduction dtype, DeepSpeed's 5e8 on GPU, pretrain/engine/ds_config.py's CPU_BUCKET on CPU; stage 3:
  the bucket at fp32 and the 5e7-parameter prefetch bucket) and, on GPU, 1 GiB for the CUDA
  context, cuBLAS workspaces and NCCL buffers plus 10% of the activations for the caching
  allocator's fragmentation.

The total adds every part as if they peaked together (gradients are all there only at the end of
backward, activations only at its start): an upper bound by the gradients' share. `fits` means the
total is at most (1 - HEADROOM) of the device's memory (a process sees a little less than the
datasheet: an 80 GB H100 reports 79.6 GiB).

`choose_layout` picks, for a global batch on nodes × devices per node: activation checkpointing only
when nothing fits without it (none, then every 4th / 2nd block, then full), and for the first
level that fits the smallest ZeRO stage and the largest micro-batch (a divisor of the per-rank
batch), gradient accumulation making up the rest. The trainer has no tensor or pipeline
parallelism: when ZeRO-3 with full checkpointing at micro-batch 1 does not fit, it says the run
needs them (or CPU offload) instead of a layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.accounting import model_counts
from models.config import ModelConfig

GIB = 1 << 30
PRECISIONS = ("fp32", "bf16", "fp16")
OPTIMIZERS = ("adamw", "muon")
CHECKPOINTING = ("none", "full", "every_k")
DEVICES = ("cuda", "cpu")
HEADROOM = 0.05  # share of the device's memory never planned (driver, ECC, what the datasheet rounds)
GPU_CONTEXT_BYTES = 1 * GIB  # CUDA context, cuBLAS workspaces, NCCL buffers
GPU_FRAGMENTATION = 0.10  # of the activations: the caching allocator's fragmentation
DS_REDUCE_BUCKET = 500_000_000  # DeepSpeed's reduce_bucket_size default (elements)
DS_PREFETCH_BUCKET = 50_000_000  # DeepSpeed's stage3_prefetch_bucket_size default (elements)
CPU_REDUCE_BUCKET = 5_000_000  # pretrain/engine/ds_config.py CPU_BUCKET (kept equal by a test)
LOGIT_BUFFERS = 3  # fp32 (tokens x vocab) buffers alive at the loss's backward


@dataclass(frozen=True)
class ParamSplit:
    total: int  # every trainable parameter, tied ones once
    matmul: int  # weights of matmuls (autocast casts them): all but the input embedding and norms
    muon: int  # what Muon updates: the blocks' matrices and expert stacks
    largest_layer: int  # the largest single module's own parameters (DeepSpeed's largest_layer_params)
    largest_tensor: int  # the largest single tensor


def resolved_vocab(cfg: ModelConfig) -> int:
    """cfg.vocab_size, which a config takes from the prepared data: an error while it is unresolved."""
    if cfg.vocab_size is None:
        raise ValueError("model.vocab_size must be resolved before the memory estimate")
    return cfg.vocab_size


def param_split(cfg: ModelConfig) -> ParamSplit:
    c = model_counts(cfg)
    d, v, L = cfg.d_model, resolved_vocab(cfg), cfg.n_layers
    norms = 2 * d * L + d
    embed = v * d
    moe = getattr(cfg, "moe", None)
    routers = 0 if moe is None else d * moe.num_experts * len(moe.moe_layers(L))
    head = 0 if cfg.tie_embeddings else v * d
    muon = c.total - embed - head - norms - routers
    attn = (d * d, d * cfg.kv_heads * cfg.head_dim)
    ffn = [d * cfg.ffn_dim]
    if moe is not None:
        f = moe.d_ff or cfg.ffn_dim
        ffn.append(3 * moe.num_experts * d * f)  # GroupedExperts: three (E, f, d) stacks in one module
        ffn.append(moe.num_shared_experts * d * f)
    largest_layer = max(embed, head, *attn, *ffn)
    largest_tensor = max(
        embed, head, *attn, d * cfg.ffn_dim, *([] if moe is None else [moe.num_experts * d * (moe.d_ff or cfg.ffn_dim)])
    )
    return ParamSplit(
        c.total,
        c.total - embed - norms if not cfg.tie_embeddings else c.total - norms,
        muon,
        largest_layer,
        largest_tensor,
    )


def model_state_bytes(
    p: ParamSplit, zero_stage: int, world_size: int, precision: str = "bf16", optimizer: str = "adamw"
) -> dict[str, int]:
    """{params, grads, optimizer} bytes per rank (the table in the module docstring)."""
    P, N, LL = p.total, world_size, p.largest_layer
    if optimizer == "muon":  # DeepSpeed's ZeRO-0 engine; our own whole-tensor sharding at stage 1
        states = 4 * p.muon + 8 * (P - p.muon)
        if zero_stage >= 1 and N > 1:
            states = states // N + 8 * p.largest_tensor
        params = 4 * P + (2 * p.matmul if precision != "fp32" else 0)
        return {"params": params, "grads": 4 * P, "optimizer": states}
    if precision == "fp32":
        table = {
            0: (4 * P, 4 * P, 8 * P),
            1: (4 * P, 4 * P + 4 * P // N, 12 * P // N),
            2: (4 * P, 4 * P // N, 12 * P // N),
            3: (4 * P // N + 4 * LL, 4 * P // N + 4 * LL, 12 * P // N),
        }
    else:
        # ZeRO-2/3 as DeepSpeed's estimators, rounded as they are: int(18P/N) split over the parts
        z2 = (2 * P, 18 * P // N - 12 * P // N, 12 * P // N)
        z3 = (2 * P // N + 2 * LL, 18 * P // N - 2 * P // N - 12 * P // N + 2 * LL, 12 * P // N)
        if precision == "bf16":
            table = {0: (4 * P + 2 * p.matmul, 4 * P, 8 * P), 1: (2 * P, 4 * P, 12 * P // N), 2: z2, 3: z3}
        else:  # fp16: DeepSpeed's own fp16 optimizers
            table = {0: (2 * P, 6 * P, 12 * P), 1: (2 * P, 2 * P + 4 * P // N, 12 * P // N), 2: z2, 3: z3}
    params, grads, opt = table[zero_stage]
    return {"params": params, "grads": grads, "optimizer": opt}


def _act_mode(precision: str, engine_stage: int) -> str:
    if precision == "fp32":
        return "fp32"
    return "autocast" if engine_stage == 0 and precision == "bf16" else "half"


def layer_activation_bytes(
    cfg: ModelConfig, tokens: int, mode: str, device: str = "cuda", moe_layer: bool | None = None
) -> int:
    """Bytes one block keeps for backward over `tokens` tokens (micro-batch x seq_len); `moe_layer` False
    counts an MoE model's dense block (its first_dense_layers / every_k_layers gaps), None any MoE block."""
    h, a, f = cfg.d_model, cfg.n_heads, cfg.ffn_dim
    kv = cfg.kv_heads * cfg.head_dim
    if mode == "fp32" and device == "cuda" and kv < h:
        kv = h  # fp32 CUDA SDPA takes no grouped K/V heads: they are expanded (models/layers.py native_gqa)
    moe = getattr(cfg, "moe", None) if moe_layer is not False else None
    if moe is not None:  # top_k expert copies of the FFN activations and the router's logits, per token
        f = (moe.top_k + moe.num_shared_experts) * (moe.d_ff or cfg.ffn_dim)
    if mode == "fp32":
        per_token = 4 * (8 * h + 2 * kv + 4 * f)
    elif mode == "half":
        per_token = 20 * h + 4 * kv + 8 * f
    else:  # autocast: fp32 residual stream and norms, a bf16 copy of a norm's output per projection reading it
        per_token = 30 * h + 4 * kv + 8 * f
    per_token += 4 * a + 8  # attention log-sum-exp, two rsqrt
    if moe is not None:
        per_token += 4 * moe.num_experts
    return per_token * tokens


def activation_bytes(
    cfg: ModelConfig,
    micro_batch_size: int,
    mode: str,
    checkpointing: str = "none",
    k: int | None = None,
    device: str = "cuda",
) -> int:
    """Peak activation bytes of one micro-batch's forward/backward (see the module docstring)."""
    tokens = micro_batch_size * cfg.seq_len
    h, L = cfg.d_model, cfg.n_layers
    moe = getattr(cfg, "moe", None)
    dense_block = layer_activation_bytes(cfg, tokens, mode, device, moe_layer=False)
    moe_block = layer_activation_bytes(cfg, tokens, mode, device) if moe is not None else dense_block
    blocks = [moe_block if moe is not None and moe.is_moe_layer(i) else dense_block for i in range(L)]
    residual = 2 if mode == "half" else 4
    norm = ({"fp32": 12 * h, "half": 8 * h, "autocast": 10 * h}[mode] + 4) * tokens  # the final norm
    logits = LOGIT_BUFFERS * 4 * resolved_vocab(cfg) * tokens
    if checkpointing == "none":
        checkpointed = set()
    elif checkpointing == "full":
        checkpointed = set(range(L))
    else:
        if not k or k < 1:
            raise ValueError("activation_checkpointing every_k needs k >= 1")
        checkpointed = set(range(0, L, k))
    kept = sum(b for i, b in enumerate(blocks) if i not in checkpointed) + len(checkpointed) * residual * h * tokens
    # one checkpointed block is rebuilt at a time in backward
    recompute = max((blocks[i] for i in checkpointed), default=0)
    return kept + norm + max(logits, recompute)


def reduce_bucket_bytes(engine_stage: int, precision: str, device: str, bucket: int | None = None) -> int:
    """ZeRO's gradient buckets (pretrain/engine/ds_config.py sets the CPU size; DeepSpeed's defaults on GPU)."""
    if engine_stage == 0 or (engine_stage == 1 and precision == "bf16"):
        return 0  # no ZeRO optimizer; BF16_Optimizer reduces its flat fp32 buffer in place
    n = bucket or (CPU_REDUCE_BUCKET if device == "cpu" else DS_REDUCE_BUCKET)
    if engine_stage == 3:
        return 4 * n + 2 * DS_PREFETCH_BUCKET  # fp32 reduction (communication_data_type) + bf16 prefetch
    return n * (4 if precision == "fp32" else 2)


@dataclass(frozen=True)
class MemoryEstimate:
    per_device_bytes: dict[str, int]
    device_memory_bytes: int | None
    zero_stage: int
    micro_batch_size: int
    activation_checkpointing: str
    activation_checkpointing_k: int | None
    gradient_accumulation_steps: int
    world_size: int
    precision: str
    optimizer: str
    engine_zero_stage: int
    notes: tuple[str, ...] = ()

    @property
    def fits(self) -> bool | None:
        if self.device_memory_bytes is None:
            return None
        return self.per_device_bytes["total"] <= (1 - HEADROOM) * self.device_memory_bytes

    def to_dict(self) -> dict:
        return {
            "per_device_bytes": dict(self.per_device_bytes),
            "device_memory_bytes": self.device_memory_bytes,
            "zero_stage": self.zero_stage,
            "micro_batch_size": self.micro_batch_size,
            "activation_checkpointing": self.activation_checkpointing,
            "activation_checkpointing_k": self.activation_checkpointing_k,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
            "fits": self.fits,
            "world_size": self.world_size,
            "precision": self.precision,
            "optimizer": self.optimizer,
            "engine_zero_stage": self.engine_zero_stage,
            "headroom": HEADROOM,
            "notes": list(self.notes),
        }


def estimate_memory(
    cfg: ModelConfig,
    *,
    micro_batch_size: int,
    zero_stage: int = 0,
    world_size: int = 1,
    precision: str = "bf16",
    optimizer: str = "adamw",
    activation_checkpointing: str = "none",
    activation_checkpointing_k: int | None = None,
    gradient_accumulation_steps: int = 1,
    device: str = "cuda",
    device_memory_bytes: int | None = None,
    reduce_bucket_size: int | None = None,
) -> MemoryEstimate:
    """Per-rank bytes of one training step (see the module docstring for every term)."""
    _check(cfg, micro_batch_size, zero_stage, world_size, precision, optimizer, activation_checkpointing, device)
    engine = 0 if optimizer == "muon" else zero_stage
    p = param_split(cfg)
    states = model_state_bytes(p, zero_stage, world_size, precision, optimizer)
    mode = _act_mode(precision, engine)
    acts = activation_bytes(cfg, micro_batch_size, mode, activation_checkpointing, activation_checkpointing_k, device)
    other = reduce_bucket_bytes(engine, precision, device, reduce_bucket_size)
    if device == "cuda":
        other += GPU_CONTEXT_BYTES + int(GPU_FRAGMENTATION * acts)
    parts = {**states, "activations": acts, "other": other}
    parts["total"] = sum(parts.values())
    notes = []
    if optimizer == "muon":
        notes.append(
            "optim muon runs DeepSpeed's ZeRO-0 engine (fp32 weights and gradients"
            + (", bf16 autocast" if precision == "bf16" else "")
            + ")"
            + ("; its ZeRO-1 shares whole tensors' optimizer states over the ranks" if zero_stage else "")
        )
    if precision == "bf16" and engine == 0:
        notes.append(
            "bf16 at ZeRO-0: fp32 weights and gradients with autocast (pretrain/engine/ds_config.py), not bf16 weights"
        )
    if precision == "bf16" and engine == 1:
        notes.append(
            "bf16 ZeRO-1 with fp32 gradient accumulation is DeepSpeed's BF16_Optimizer: a full fp32 gradient buffer"
        )
    if device == "cpu" and engine in (1, 2, 3):
        bucket = reduce_bucket_size or CPU_REDUCE_BUCKET
        notes.append(f"CPU: ZeRO buckets of {bucket:,} elements (pretrain/engine/ds_config.py)")
    if getattr(cfg, "moe", None) is not None:
        notes.append("MoE activations are estimated (top_k expert copies of the FFN), not measured")
    return MemoryEstimate(
        parts,
        device_memory_bytes,
        zero_stage,
        micro_batch_size,
        activation_checkpointing,
        activation_checkpointing_k,
        gradient_accumulation_steps,
        world_size,
        precision,
        optimizer,
        engine,
        tuple(notes),
    )


def _check(cfg, micro_batch_size, zero_stage, world_size, precision, optimizer, checkpointing, device) -> None:
    if cfg.vocab_size is None:
        raise ValueError("model.vocab_size is not resolved: the memory estimate needs it")
    for name, value, allowed in (
        ("precision", precision, PRECISIONS),
        ("optimizer", optimizer, OPTIMIZERS),
        ("activation_checkpointing", checkpointing, CHECKPOINTING),
        ("device", device, DEVICES),
    ):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)} (got {value!r})")
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0-3 (got {zero_stage})")
    if micro_batch_size < 1 or world_size < 1:
        raise ValueError("micro_batch_size and world_size must be >= 1")


# ---------------------------------------------------------------- layout
CHECKPOINT_LEVELS: tuple[tuple[str, int | None], ...] = (("none", None), ("every_k", 4), ("every_k", 2), ("full", None))


@dataclass(frozen=True)
class Layout:
    estimate: MemoryEstimate
    nodes: int
    devices_per_node: int
    fits: bool
    reason: str | None = None  # why nothing fits (and what it would take)

    def to_dict(self) -> dict:
        out = self.estimate.to_dict()
        out.update(fits=self.fits, nodes=self.nodes, devices_per_node=self.devices_per_node, reason=self.reason)
        return out


def choose_layout(
    cfg: ModelConfig,
    *,
    global_batch_size: int,
    device_memory_bytes: int,
    nodes: int = 1,
    devices_per_node: int = 1,
    precision: str = "bf16",
    optimizer: str = "adamw",
    device: str = "cuda",
) -> Layout:
    """The cheapest data-parallel layout that fits (module docstring); `fits` False with a reason if none."""
    world = nodes * devices_per_node
    if world < 1 or global_batch_size < 1:
        raise ValueError("nodes, devices_per_node and global_batch_size must be >= 1")
    if global_batch_size % world:
        raise ValueError(f"global batch {global_batch_size} is not a multiple of the {world} devices")
    per_rank = global_batch_size // world
    micro = [m for m in range(per_rank, 0, -1) if per_rank % m == 0]
    stages = (0, 1) if optimizer == "muon" else (0, 1, 2, 3)
    levels = [lv for lv in CHECKPOINT_LEVELS if lv[1] is None or lv[1] < cfg.n_layers]

    def est(stage: int, mb: int, level: tuple[str, int | None]) -> MemoryEstimate:
        return estimate_memory(
            cfg,
            micro_batch_size=mb,
            zero_stage=stage,
            world_size=world,
            precision=precision,
            optimizer=optimizer,
            activation_checkpointing=level[0],
            activation_checkpointing_k=level[1],
            gradient_accumulation_steps=per_rank // mb,
            device=device,
            device_memory_bytes=device_memory_bytes,
        )

    for level in levels:
        for stage in stages:
            if not est(stage, 1, level).fits:  # micro-batch 1 is the least this stage can do
                continue
            for mb in micro:
                e = est(stage, mb, level)
                if e.fits:
                    return Layout(e, nodes, devices_per_node, True)
    e = est(stages[-1], 1, ("full", None))
    need = e.per_device_bytes["total"] / GIB
    have = (1 - HEADROOM) * device_memory_bytes / GIB
    reason = (
        f"ZeRO-{stages[-1]} with full activation checkpointing at micro-batch 1 needs {need:.1f} GiB per "
        f"device, more than {have:.1f} GiB usable of {device_memory_bytes / GIB:.0f} GiB: this run needs "
        "tensor or pipeline parallelism (or CPU offload), which the trainer does not have"
        + ("; optim muon is limited to ZeRO-0/1" if optimizer == "muon" else "")
    )
    return Layout(e, nodes, devices_per_node, False, reason)
