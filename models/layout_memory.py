"""Per-device memory of a training step under tensor (tp), pipeline (pp), data (dp) and expert (ep_size)
parallelism, ZeRO and activation recomputation (torch-free).

Two engines. A layout the trainer runs (tp = pp = 1, no selective recomputation, dense or ep_size 1) is
priced by models/memory.py, the trainer's own DeepSpeed engine, byte for byte what `train --dry-run`
prints. Every other layout is priced as a Megatron-style engine (Shoeybi et al. 2019; Narayanan et al.
2021; Korthikanti et al. 2022), which the trainer does not run:

- **model states** per device: the heaviest pipeline stage's parameters, ceil(L/pp) blocks (and the
  embedding on the first stage, the output head and final norm on the last; both when pp = 1), matmul
  weights split over tp (vocab-parallel embedding and head), expert weights over ep_size x tp. Mixed
  precision keeps, per parameter, 2 bytes of bf16 weights, 4 of fp32 gradients (Megatron's
  main_grad) and 12 of optimizer state (fp32 master, Adam's two moments); fp32 training 4 + 4 + 8;
  fp16 2 + 2 + 16 (fp16 gradients, fp32 main gradients and master weights, moments): Megatron's
  distributed-optimizer table, 18 / 16 / 20 bytes, 6 + 12/d, 8 + 8/d and 4 + 16/d with ZeRO-1 over d ranks.
  ZeRO shards over the data-parallel group: stage 1 the optimizer state (Megatron's distributed
  optimizer), 2 also the gradients, 3 also the weights (plus a gather buffer of two layers' weights);
  expert states over the expert-data-parallel group dp / ep_size.
- **activations** per block per micro-batch, Korthikanti et al. 2022, Sec. 4: their GPT block keeps
  s·b·h·(34 + 5·a·s/h) bytes, of which 10·s·b·h (the norms' and the first matmuls' inputs, dropout
  masks) are replicated over tensor-parallel ranks unless sequence parallelism splits them, 24·s·b·h
  split over t, and 5·a·s²·b the attention scores, softmax and its dropout (split over t; dropped by
  selective recomputation). `korthikanti_layer_bytes` is their formula; `layer_bytes` counts the same
  terms for our Llama block (RMSNorm, GQA, SwiGLU of width f, no dropout, flash attention keeping its
  output and a log-sum-exp instead of the s² scores) and reduces to theirs for their block.
  Full recomputation keeps each block's input (2·s·b·h, over t with sequence parallelism) plus one
  block's activations while it is rebuilt; every_k recomputes blocks 0, k, 2k, ... as the trainer does.
  The pipeline's first stage holds min(pp, m) micro-batches in flight (1F1B), and an interleaved
  schedule of v chunks per device (1 + (pp - 1)/(pp·v)) times that (Korthikanti et al. 2022, Sec. 4.2.3).
  MoE blocks keep top_k copies of the expert activations, the router's fp32 logits and the dispatch
  and combine buffers of the all-to-all (top_k·capacity token copies in and out) per EP rank.
- **other**: 1 GiB of CUDA context and NCCL buffers and 10% of the activations for fragmentation, as
  models/memory.py.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from models.accounting import attention_params
from models.config import ModelConfig
from models.memory import GIB, GPU_CONTEXT_BYTES, GPU_FRAGMENTATION, HEADROOM, estimate_memory, resolved_vocab

CHECKPOINTING = ("none", "selective", "every_k", "full")
LAYOUT_KEYS = (
    "tp",
    "cp",
    "pp",
    "dp",
    "ep_size",
    "zero_stage",
    "micro_batch_size",
    "gradient_accumulation_steps",
    "activation_checkpointing",
    "activation_checkpointing_k",
    "sequence_parallel",
    "pp_interleave",
)
TRAINER_ENGINE = "scalelab trainer (DeepSpeed data parallel + ZeRO; models/memory.py)"
MEGATRON_ENGINE = "Megatron-style TP/PP/SP engine (the trainer does not run TP or PP)"
EP_ENGINE = "scalelab trainer with expert parallelism (DeepSpeed MoE; its memory as models/layout_memory.py counts it)"


@dataclass(frozen=True)
class ParallelLayout:
    """One way to lay a training step out on tp x pp x dp devices (ep_size ranks carved out of dp)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep_size: int = 1
    cp: int = 1  # context parallel: each sequence split over cp ranks (ring attention)
    zero_stage: int = 1
    micro_batch_size: int = 1
    gradient_accumulation_steps: int = 1
    activation_checkpointing: str = "none"
    activation_checkpointing_k: int | None = None
    sequence_parallel: bool = True  # used when tp > 1
    pp_interleave: int = 1  # model chunks (virtual stages) per device

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def global_batch_size(self) -> int:
        return self.dp * self.micro_batch_size * self.gradient_accumulation_steps

    @property
    def trainer_runs(self) -> bool:
        return self.tp == 1 and self.pp == 1 and self.cp == 1 and self.activation_checkpointing != "selective"

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        ck = self.activation_checkpointing + (
            f"(k={self.activation_checkpointing_k})" if self.activation_checkpointing == "every_k" else ""
        )
        parts = [f"tp={self.tp}"] + ([f"cp={self.cp}"] if self.cp > 1 else []) + [f"pp={self.pp}", f"dp={self.dp}"]
        if self.ep_size > 1:
            parts.append(f"ep_size={self.ep_size}")
        parts += [f"zero_stage={self.zero_stage}", f"micro_batch_size={self.micro_batch_size}"]
        parts.append(f"gradient_accumulation_steps={self.gradient_accumulation_steps}")
        parts.append(f"activation_checkpointing={ck}")
        if self.pp > 1 and self.pp_interleave > 1:
            parts.append(f"pp_interleave={self.pp_interleave}")
        return ", ".join(parts)


def check_layout(cfg: ModelConfig, lay: ParallelLayout) -> str | None:
    """Why `lay` cannot run `cfg` (None when it can)."""
    for key in ("tp", "cp", "pp", "dp", "ep_size", "micro_batch_size", "gradient_accumulation_steps", "pp_interleave"):
        if getattr(lay, key) < 1:
            return f"{key} must be >= 1 (got {getattr(lay, key)})"
    if lay.zero_stage not in (0, 1, 2, 3):
        return f"zero_stage must be 0-3 (got {lay.zero_stage})"
    if lay.activation_checkpointing not in CHECKPOINTING:
        return (
            f"activation_checkpointing must be one of {', '.join(CHECKPOINTING)} (got {lay.activation_checkpointing!r})"
        )
    if lay.activation_checkpointing == "every_k" and not (lay.activation_checkpointing_k or 0) >= 1:
        return "activation_checkpointing every_k needs activation_checkpointing_k >= 1"
    if cfg.n_heads % lay.tp:
        return f"tp={lay.tp} does not divide the {cfg.n_heads} attention heads"
    if lay.cp > 1 and cfg.seq_len % (2 * lay.cp):
        return (
            f"cp={lay.cp}: the sequence length {cfg.seq_len} must be a multiple of 2 x cp (load-balanced causal chunks)"
        )
    if lay.pp > cfg.n_layers:
        return f"pp={lay.pp} exceeds the {cfg.n_layers} layers"
    if lay.pp > 1 and lay.zero_stage > 1:
        return (
            f"zero_stage={lay.zero_stage} with pp={lay.pp}: pipeline parallelism runs ZeRO 0-1 (Megatron's distributed "
            "optimizer, DeepSpeed's pipeline engine): stages 2-3 shard the gradients every micro-batch accumulates"
        )
    if lay.pp_interleave > 1 and (lay.pp == 1 or math.ceil(cfg.n_layers / lay.pp) < lay.pp_interleave):
        return f"pp_interleave={lay.pp_interleave} needs pp > 1 and at least that many layers per stage"
    moe = cfg.moe
    if lay.ep_size > 1:
        if moe is None:
            return f"ep_size={lay.ep_size} needs an MoE model"
        if moe.num_experts % lay.ep_size:
            return f"ep_size={lay.ep_size} does not divide the {moe.num_experts} experts"
        if lay.dp % lay.ep_size:
            return f"ep_size={lay.ep_size} does not divide dp={lay.dp} (expert ranks are carved out of data parallel)"
    return None


# ---------------------------------------------------------------- activations
def korthikanti_layer_bytes(
    s: int, b: int, h: int, a: int, t: int = 1, sequence_parallel: bool = False, selective: bool = False
) -> float:
    """Korthikanti et al. 2022, Table 2: activation bytes of one GPT block (16-bit, GeLU MLP of 4h, dropout)."""
    replicated = 10 / t if sequence_parallel else 10
    scores = 0 if selective else 5 * a * s / (h * t)
    return s * b * h * (replicated + 24 / t + scores)


def layer_bytes(
    cfg: ModelConfig,
    tokens: int,
    t: int = 1,
    sequence_parallel: bool = True,
    selective: bool = False,
    moe_layer: bool = False,
    *,
    gelu: bool = False,
    dropout: bool = False,
    flash: bool = True,
    fp8: bool = False,
) -> float:
    """Bytes one block keeps for backward over `tokens` (= b·s) tokens on one of t tensor-parallel ranks
    (16-bit activations). gelu/dropout/flash=False give Korthikanti et al.'s GPT block exactly. `model.mla`:
    multi-head latent attention's Q, K, V and output widths, and its q and kv latents (replicated)."""
    h, a, s = cfg.d_model, cfg.n_heads, cfg.seq_len
    kv = cfg.kv_heads * cfg.head_dim
    f = cfg.ffn_dim
    replicated = 4 * h + 2 * h + 2 * h + (2 * h if dropout else 0)  # 2 norm inputs, QKV and MLP inputs, masks
    split: float = 2 * h + 4 * kv + 2 * h  # Q, K and V, the attention output (the output projection's input)
    mla = cfg.mla
    if mla is not None:
        qk, v = mla.qk_head_dim, mla.v_head_dim
        split = 2 * a * (2 * qk + 2 * v) + 2 * t * (mla.kv_lora_rank + mla.qk_rope_head_dim + (mla.q_lora_rank or 0))
    mlp: float = 4 * f if gelu else 8 * f  # GeLU: its input and output; SwiGLU: gate, up, SiLU(gate), product
    if moe_layer and cfg.moe is not None:
        m = cfg.moe
        width = m.d_ff or cfg.ffn_dim
        cap = m.capacity_factor or 1.0
        mlp = 8 * width * (m.top_k * cap + m.num_shared_experts)
        split += 4 * m.num_experts * t  # fp32 router logits (replicated: counted before the /t below)
        split += 2 * 2 * h * m.top_k * cap  # dispatch and combine buffers: top_k token copies in and out
    split += mlp
    if fp8:  # Transformer Engine keeps the matmuls' inputs in fp8: QKV and MLP inputs, o_proj and down_proj inputs
        replicated -= h + h
        split -= h + (f if not (moe_layer and cfg.moe is not None) else 0)
    if not flash:
        scores = 0 if selective else 5 * a * s
    else:
        scores = 4 * a  # flash attention's fp32 log-sum-exp per head, never the s x s scores
    rep = replicated / t if (sequence_parallel and t > 1) else replicated
    return tokens * (rep + (split + scores) / t)


def _stage_layers(cfg: ModelConfig, pp: int) -> tuple[int, int]:
    """(blocks, MoE blocks) on the heaviest pipeline stage."""
    L = cfg.n_layers
    per = math.ceil(L / pp)
    moe_layers = cfg.moe.n_moe_layers(L) if cfg.moe is not None else 0
    return per, min(per, math.ceil(moe_layers / pp))


def activation_bytes(cfg: ModelConfig, lay: ParallelLayout, fp8: bool = False) -> dict:
    """Peak activation bytes on the first and on the last pipeline stage (they differ by the in-flight
    micro-batches and the output layer)."""
    tokens = lay.micro_batch_size * cfg.seq_len // lay.cp  # context parallel: each rank's share of the sequence
    t, sp = lay.tp, lay.sequence_parallel
    blocks, moe_blocks = _stage_layers(cfg, lay.pp)
    selective = lay.activation_checkpointing == "selective"
    dense_b = layer_bytes(cfg, tokens, t, sp, selective, fp8=fp8)
    moe_b = layer_bytes(cfg, tokens, t, sp, selective, moe_layer=True, fp8=fp8) if moe_blocks else 0.0
    full_stage = (blocks - moe_blocks) * dense_b + moe_blocks * moe_b
    block_input = 2 * cfg.d_model * tokens / (t if (sp and t > 1) else 1)
    ck = lay.activation_checkpointing
    if ck == "full":
        kept = blocks * block_input
        rebuilt = max(dense_b, moe_b)
    elif ck == "every_k":
        n_ck = len(range(0, blocks, lay.activation_checkpointing_k or 1))
        kept = full_stage * (blocks - n_ck) / blocks + n_ck * block_input
        rebuilt = max(dense_b, moe_b)
    else:
        kept, rebuilt = full_stage, 0.0
    in_flight: float = min(lay.pp, lay.gradient_accumulation_steps)
    if lay.pp > 1 and lay.pp_interleave > 1:
        in_flight *= 1 + (lay.pp - 1) / (lay.pp * lay.pp_interleave)
    logits = 3 * 4 * resolved_vocab(cfg) / t * tokens  # fp32 log-softmax and two backward buffers (models/memory.py)
    first = kept * in_flight + rebuilt + (logits if lay.pp == 1 else 0)
    last = kept + rebuilt + logits
    if cfg.mtp_depth:  # each MTP module: a block like the last one (kept whole) and its own logits, on the last stage
        last_b = moe_b if cfg.moe is not None and cfg.moe.is_moe_layer(cfg.n_layers - 1) else dense_b
        last += cfg.mtp_depth * (last_b + logits)
    return {"first_stage": first, "last_stage": last, "in_flight_micro_batches": in_flight}


# ---------------------------------------------------------------- model states
def stage_params(cfg: ModelConfig, lay: ParallelLayout) -> dict:
    """Parameters on one device of the heaviest stage: {dense, expert, largest_layer} (tp/ep applied).
    `model.mla`: multi-head latent attention's projections (split by tp like the others); `model.mtp_depth`:
    the multi-token-prediction modules (a block like the last one and a 2d x d projection each), on the last
    stage, which is then the heaviest."""
    mtp_depth = cfg.mtp_depth
    h, V = cfg.d_model, resolved_vocab(cfg)
    blocks, moe_blocks = _stage_layers(cfg, lay.pp)
    attn = attention_params(cfg) / lay.tp + 2 * h
    dense_ffn = 3 * h * cfg.ffn_dim / lay.tp
    expert = shared = router = 0.0
    if cfg.moe is not None:
        m = cfg.moe
        width = m.d_ff or cfg.ffn_dim
        expert = 3 * h * width * m.num_experts / (lay.ep_size * lay.tp)
        shared = 3 * h * width * m.num_shared_experts / lay.tp
        router = h * m.num_experts
    embed = V * h / lay.tp
    head = 0 if cfg.tie_embeddings else V * h / lay.tp
    ends = embed + head + h if lay.pp == 1 else max(embed, head + h)
    dense = blocks * attn + (blocks - moe_blocks) * dense_ffn + moe_blocks * (shared + router) + ends
    last_moe = cfg.moe is not None and cfg.moe.is_moe_layer(cfg.n_layers - 1)
    dense += mtp_depth * (attn + (shared + router if last_moe else dense_ffn) + 2 * h * h / lay.tp + 3 * h)
    n_expert = moe_blocks + (mtp_depth if last_moe else 0)
    largest = max(attn, dense_ffn, expert, embed)  # ZeRO-3 gathers one module at a time
    return {"dense": dense, "expert": n_expert * expert, "largest_layer": largest}


# bytes per parameter of (weights, gradients, optimizer state); fp8 (Transformer Engine): bf16 weights plus their
# fp8 copy, gradients and optimizer states unchanged
STATE_BYTES = {"fp32": (4, 4, 8), "fp16": (2, 2, 16), "fp8": (3, 4, 12), "bf16": (2, 4, 12)}


def zero_sharded_bytes(n_params: float, group: int, zero_stage: int, per_param: tuple[int, int, int]) -> dict:
    """{params, grads, optimizer} bytes of `n_params` on one of `group` data-parallel ranks (Rajbhandari et al.
    2020, Sec. 5: stage 1 shards the optimizer state, 2 also the gradients, 3 also the weights)."""
    w, g, o = per_param
    return {
        "params": w * n_params / (group if zero_stage >= 3 else 1),
        "grads": g * n_params / (group if zero_stage >= 2 else 1),
        "optimizer": o * n_params / (group if zero_stage >= 1 else 1),
    }


def state_bytes(cfg: ModelConfig, lay: ParallelLayout, precision: str = "bf16") -> dict:
    """{params, grads, optimizer, expert_params} bytes per device (module docstring)."""
    p = stage_params(cfg, lay)
    per_param = STATE_BYTES.get(precision, STATE_BYTES["bf16"])
    w, z = per_param[0], lay.zero_stage
    out = {"params": 0.0, "grads": 0.0, "optimizer": 0.0}
    dp = lay.dp * lay.cp  # the distributed optimizer shards over data x context parallel ranks
    for n, group in ((p["dense"], dp), (p["expert"], max(1, dp // lay.ep_size))):
        for k, v in zero_sharded_bytes(n, group, z, per_param).items():
            out[k] += v
    if z == 3:
        out["params"] += 2 * w * p["largest_layer"]  # the gathered layer and the prefetched one
    out["expert_params"] = w * p["expert"] / (max(1, dp // lay.ep_size) if z >= 3 else 1)
    return out


# ---------------------------------------------------------------- the whole device
def layout_memory(
    cfg: ModelConfig,
    lay: ParallelLayout,
    precision: str = "bf16",
    device_memory_bytes: int | None = None,
) -> dict:
    """Per-device bytes of `lay` (the heavier of the first and last pipeline stage) and whether it fits.
    `model.mla`/`model.mtp_depth` (which the trainer does not build) are priced by the layout formulas,
    never the trainer's estimate."""
    builds = not cfg.priced_only()
    problem = check_layout(cfg, lay)
    if problem:
        raise ValueError(problem)
    ep_ok = cfg.moe is None or lay.ep_size == 1
    if lay.trainer_runs and ep_ok and precision != "fp8" and builds:
        k = lay.activation_checkpointing_k if lay.activation_checkpointing == "every_k" else None
        est = estimate_memory(
            cfg,
            micro_batch_size=lay.micro_batch_size,
            zero_stage=lay.zero_stage,
            world_size=lay.dp,
            precision=precision,
            activation_checkpointing=lay.activation_checkpointing,
            activation_checkpointing_k=k,
            gradient_accumulation_steps=lay.gradient_accumulation_steps,
            device_memory_bytes=device_memory_bytes,
        )
        parts = dict(est.per_device_bytes)
        out: dict[str, Any] = {"engine": TRAINER_ENGINE, "per_device_bytes": parts, "in_flight_micro_batches": 1}
    else:
        states = state_bytes(cfg, lay, precision)
        acts = activation_bytes(cfg, lay, fp8=precision == "fp8")
        # the first stage holds the in-flight micro-batches, the last the logits
        act = max(acts["first_stage"], acts["last_stage"]) if lay.pp > 1 else acts["first_stage"]
        parts = {k: int(v) for k, v in states.items() if k != "expert_params"}
        parts["activations"] = int(act)
        parts["other"] = int(GPU_CONTEXT_BYTES + GPU_FRAGMENTATION * act)
        parts["total"] = sum(parts.values())
        out = {
            "engine": EP_ENGINE if lay.trainer_runs and precision != "fp8" and builds else MEGATRON_ENGINE,
            "per_device_bytes": parts,
            "in_flight_micro_batches": acts["in_flight_micro_batches"],
            "expert_param_bytes": int(states["expert_params"]),
        }
    out["device_memory_bytes"] = device_memory_bytes
    out["headroom"] = HEADROOM
    total = out["per_device_bytes"]["total"]
    out["fits"] = None if device_memory_bytes is None else total <= (1 - HEADROOM) * device_memory_bytes
    return out


__all__ = [
    "CHECKPOINTING",
    "GIB",
    "LAYOUT_KEYS",
    "ParallelLayout",
    "activation_bytes",
    "check_layout",
    "korthikanti_layer_bytes",
    "layer_bytes",
    "layout_memory",
    "stage_params",
    "state_bytes",
]
