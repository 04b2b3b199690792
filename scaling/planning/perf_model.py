"""Step time of a laid-out training run predicted from the hardware, not an MFU typed in (torch-free).

    step = (m + (pp - 1) / v) x t_micro  +  exposed DP communication  +  optimizer step
    t_micro = 3 x forward compute  +  recomputation  +  TP and EP communication  +  pipeline sends
              + exposed ZeRO-3 gathers

for m = gradient-accumulation micro-batches per step, pp stages and v interleaved chunks per device
(the 1F1B bubble, Narayanan et al. 2021, Sec. 2.2). Per micro-batch on the heaviest stage:

- **compute**: every matmul of a block on one tensor-parallel shard (QKV, output, SwiGLU gate/up and
  down, MoE experts on the tokens an EP rank receives, the output head spread over the stages) at
  peak x e(M, N, K), e = gemm_efficiency x g(M) g(N) g(K), g(x) = x / (x + gemm_half_dim): small
  dimensions (a narrow TP shard, few tokens per expert) run further from the peak; the attention core
  (4 b s^2 h / t forward, the accounting's convention) at peak x attention_efficiency; the
  memory-bound element-wise work (norms, residuals, RoPE, SwiGLU, the loss) at the HBM bandwidth.
  Backward is twice the forward. Recomputation: full reruns each block's forward, every_k one block in
  k, selective the attention core (Korthikanti et al. 2022).
- **TP**: two all-reduces of b s h 16-bit values per block forward, two backward and two more per
  block whose forward is recomputed (full, every_k; selective recomputes the attention core alone, with
  no communication); with sequence parallelism all-gather + reduce-scatter, the same volume. Inside the
  node's NVLink domain (--devices-per-node) when tp fits it, not overlapped.
- **EP**: four all-to-alls per MoE block of the routed token copies, over NVLink when ep_size x tp fits
  a node, else the network.
- **DP**: gradients reduce-scattered (all-reduced at ZeRO-0) and weights all-gathered once per step
  over the network (inside a node when the whole group is), hidden behind one micro-batch's work by
  the fraction `overlap`; ZeRO-3 gathers the weights in forward and backward and reduces gradients
  every micro-batch, hidden behind that micro-batch's compute by the same fraction; ZeRO-2 reduce-scatters
  every micro-batch's gradients (its shards cannot accumulate the full gradient), hidden the same way.
- **optimizer**: 30 bytes of HBM traffic per local parameter (fp32 master, moments, gradient, weight).

Collectives are ring-style: all-reduce 2 (n - 1) / n x bytes / bandwidth, the others (n - 1) / n, at
`comm_efficiency` of the link (rundir/accelerators.py's one-direction bandwidths). The free constants
(CALIBRATION) are fitted to published throughput (scaling/planning/calibration.py); MFU is the
accounting's model FLOPs (6 N + attention per token) over step time x devices x peak, HFU adds the
recomputed FLOPs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache

from models.accounting import attention_layer_flops_per_token, model_counts
from models.config import ModelConfig
from models.layout_memory import ParallelLayout
from models.memory import resolved_vocab
from rundir.accelerators import HBM_BYTES_PER_S, NETWORK_BYTES_PER_S, NVLINK_BYTES_PER_S
from scaling.core.errors import InputError
from scaling.planning.devices import peak_flops


@dataclass(frozen=True)
class Calibration:
    gemm_efficiency: float  # the share of the dense peak the largest matmuls reach
    gemm_half_dim: float  # a matmul dimension at which g(x) = 1/2
    attention_efficiency: float  # flash attention's share of the peak on the accounting's (non-causal) FLOPs
    overlap: float  # the share of DP / ZeRO communication hidden behind compute
    memory_traffic: float = 1.0  # element-wise HBM traffic over the fused count below (unfused kernels, casts)
    comm_efficiency: float = 0.80  # NCCL's bus bandwidth over the link's one-direction datasheet bandwidth
    launch_s: float = 5e-6  # per kernel: launch and synchronisation (about 14 kernels per block forward)


# Fitted by scaling/planning/calibration.py on the runs it cites (docs/model-design.md's table); a test
# refits and checks these.
# attention_efficiency sits at its bound: on the non-causal FLOPs counted, causal kernels at half the peak.
CALIBRATION = Calibration(
    gemm_efficiency=0.764, gemm_half_dim=27.8, attention_efficiency=1.0, overlap=0.12, memory_traffic=4.5
)
KERNELS_PER_BLOCK = 14
OPTIMIZER_BYTES_PER_PARAM = 30


@dataclass(frozen=True)
class Machine:
    device: str
    precision: str
    peak: float
    hbm: float
    nvlink: float
    network: float
    devices_per_node: int
    attention_peak: float = 0.0  # fp8: attention stays in bf16 (Transformer Engine's recipe)


def machine(device: str, precision: str = "bf16", devices_per_node: int = 8) -> Machine:
    """The device's peak and bandwidths (rundir/accelerators.py); InputError where the table lacks them."""
    if device not in NVLINK_BYTES_PER_S or device not in NETWORK_BYTES_PER_S:
        raise InputError(f"device {device}: no link bandwidths in the device table: no step-time model for it")
    peak = peak_flops(device, precision)
    return Machine(
        device,
        precision,
        peak,
        HBM_BYTES_PER_S[device],
        NVLINK_BYTES_PER_S[device],
        NETWORK_BYTES_PER_S[device],
        devices_per_node,
        peak_flops(device, "bf16") if precision == "fp8" else peak,
    )


def _ring(kind: str, nbytes: float, n: int, bw: float, cal: Calibration) -> float:
    if n <= 1 or nbytes <= 0:
        return 0.0
    factor = 2.0 if kind == "all_reduce" else 1.0
    return factor * (n - 1) / n * nbytes / (bw * cal.comm_efficiency) + 10e-6


def _group_bw(mach: Machine, size: int, stride: int) -> float:
    """Bandwidth per device of a collective over `size` ranks `stride` apart (Megatron's rank order: tp
    fastest, then dp, then pp): NVLink inside a node; across nodes the NICs of the group's members on
    a node work side by side (NCCL's rings run one per NIC), up to NVLink's bandwidth."""
    dpn = mach.devices_per_node
    if size * stride <= dpn:
        return mach.nvlink
    per_node = max(1, min(size, dpn // stride))
    return min(mach.nvlink, mach.network * per_node)


def _exposed(comm: float, window: float, cal: Calibration) -> float:
    """Communication that `window` seconds of compute do not hide."""
    return max(0.0, comm - window) + (1 - cal.overlap) * min(comm, window)


class _Block:
    """Forward times of one block and of the head for (cfg, tp, micro-batch) on a machine, cached."""

    def __init__(self, cfg: ModelConfig, mach: Machine, cal: Calibration):
        self.cfg, self.mach, self.cal = cfg, mach, cal
        self.counts = model_counts(cfg)  # the same for every layout searched

    def gemm(self, m: float, n: float, k: float) -> float:
        x0 = self.cal.gemm_half_dim
        g = (m / (m + x0)) * (n / (n + x0)) * (k / (k + x0))
        return 2 * m * n * k / (self.mach.peak * self.cal.gemm_efficiency * g)

    @lru_cache(maxsize=4096)  # noqa: B019 (one instance per search)
    def forward(self, tp: int, mb: int, sp: bool, moe_layer: bool, ep: int = 1, cp: int = 1) -> dict:
        cfg, mach, cal = self.cfg, self.mach, self.cal
        h, s, f = cfg.d_model, cfg.seq_len, cfg.ffn_dim
        kv = cfg.kv_heads * cfg.head_dim
        T = mb * s / cp  # context parallel: this rank's queries (against all s keys in attention)
        la = cfg.mla
        if la is None:
            mm = self.gemm(T, (h + 2 * kv) / tp, h) + self.gemm(T, h, h / tp)
            attn_w = 2 * (h + kv)  # element-wise widths of Q, K, V and the attention output
            core = 4 * T * s * h / tp  # the accounting's 12 s h per token and layer, forward
        else:  # MLA: the down projections to the latents replicated on the tp ranks, the up ones split by heads
            a, qk, v = cfg.n_heads, la.qk_head_dim, la.v_head_dim
            if la.q_lora_rank:
                mm = self.gemm(T, la.q_lora_rank, h) + self.gemm(T, a * qk / tp, la.q_lora_rank)
            else:
                mm = self.gemm(T, a * qk / tp, h)
            mm += self.gemm(T, la.kv_lora_rank + la.qk_rope_head_dim, h)
            mm += self.gemm(T, a * (la.qk_nope_head_dim + v) / tp, la.kv_lora_rank) + self.gemm(T, h, a * v / tp)
            attn_w = a * (2 * qk + 2 * v)
            core = 2 * T * s * a * (qk + v) / tp  # the accounting's latent-attention convention, forward
        elem = 2 * (10 * h / (tp if sp and tp > 1 else 1) + (attn_w + 3 * f) / tp)
        if moe_layer and cfg.moe is not None:
            m = cfg.moe
            w = m.d_ff or f
            cap = m.capacity_factor or 1.0
            routed = T * m.top_k * cap  # token copies an EP rank computes (balanced)
            per_expert = max(1.0, routed * ep / m.num_experts)  # the group's copies over its experts
            experts = m.num_experts / ep
            mm += experts * (self.gemm(per_expert, 2 * w / tp, h) + self.gemm(per_expert, h, w / tp))
            if m.num_shared_experts:
                ns = m.num_shared_experts
                mm += self.gemm(T, 2 * w * ns / tp, h) + self.gemm(T, h, w * ns / tp)
            mm += self.gemm(T, m.num_experts, h)
            elem = 2 * (10 * h / (tp if sp and tp > 1 else 1) + (attn_w + 3 * w * m.top_k) / tp)
        else:
            mm += self.gemm(T, 2 * f / tp, h) + self.gemm(T, h, f / tp)
        attn = core / ((mach.attention_peak or mach.peak) * cal.attention_efficiency)
        elem_t = cal.memory_traffic * elem * T / mach.hbm
        return {"matmul": mm, "attention": attn, "elementwise": elem_t, "launch": KERNELS_PER_BLOCK * cal.launch_s}

    @lru_cache(maxsize=1024)  # noqa: B019
    def head(self, tp: int, mb: int, cp: int = 1) -> float:
        cfg = self.cfg
        T, V = mb * cfg.seq_len / cp, resolved_vocab(cfg)
        return self.gemm(T, V / tp, cfg.d_model) + 12 * T * V / tp / self.mach.hbm


def n_ck_blocks(blocks: int, lay: ParallelLayout) -> int:
    """Blocks of a stage whose forward every_k recomputes (0, k, 2k, ...; models/checkpointing.py)."""
    return len(range(0, blocks, lay.activation_checkpointing_k or 1))


def _stage_params(cfg: ModelConfig, lay: ParallelLayout) -> tuple[float, float]:
    from models.layout_memory import stage_params

    p = stage_params(cfg, lay)
    return p["dense"], p["expert"]


def step_time(
    cfg: ModelConfig,
    lay: ParallelLayout,
    mach: Machine,
    cal: Calibration = CALIBRATION,
    block: _Block | None = None,
) -> dict:
    """Predicted seconds per optimizer step of `lay` and where they go (module docstring); `model.mla` and
    `model.mtp_depth` (priced, not built by the trainer) included."""
    block = block or _Block(cfg, mach, cal)
    mtp_depth = cfg.mtp_depth
    tp, pp, v, m = lay.tp, lay.pp, max(1, lay.pp_interleave), lay.gradient_accumulation_steps
    sp = lay.sequence_parallel
    L = cfg.n_layers
    blocks = math.ceil(L / pp)
    n_moe = cfg.moe.n_moe_layers(L) if cfg.moe is not None else 0
    moe_blocks = min(blocks, math.ceil(n_moe / pp))
    cp = lay.cp
    T = lay.micro_batch_size * cfg.seq_len / cp
    dense_f = block.forward(tp, lay.micro_batch_size, sp, False, 1, cp)
    moe_f = block.forward(tp, lay.micro_batch_size, sp, True, lay.ep_size, cp) if moe_blocks else dense_f
    per_block = lambda d: d["matmul"] + d["attention"] + d["elementwise"] + d["launch"]  # noqa: E731
    fwd = (blocks - moe_blocks) * per_block(dense_f) + moe_blocks * per_block(moe_f)
    head = block.head(tp, lay.micro_batch_size, cp) / pp
    if mtp_depth:  # each MTP module: a block like the last, its 2d x d projection and one more head pass
        last = moe_f if (cfg.moe is not None and cfg.moe.is_moe_layer(L - 1)) else dense_f
        mtp = (
            per_block(last)
            + block.gemm(T, cfg.d_model / tp, 2 * cfg.d_model)
            + block.head(tp, lay.micro_batch_size, cp)
        )
        head += mtp_depth * mtp / pp  # spread over the stages like the head (DeepSeek-V3 puts it on the last)
    fwd += head
    compute = 3 * fwd
    ck = lay.activation_checkpointing
    if ck == "full":
        recompute = fwd - head
    elif ck == "every_k":
        recompute = (fwd - head) * n_ck_blocks(blocks, lay) / blocks
    elif ck == "selective":
        recompute = blocks * dense_f["attention"]
    else:
        recompute = 0.0
    tp_bw = _group_bw(mach, tp, 1)
    ar = _ring("all_reduce", 2 * T * cfg.d_model, tp, tp_bw, cal)
    # two all-reduces forward, two backward, and two more for each block whose forward is recomputed
    recomputed_blocks = blocks if ck == "full" else (n_ck_blocks(blocks, lay) if ck == "every_k" else 0)
    tp_comm = ar * (4 * blocks + 2 * recomputed_blocks)
    cp_comm = 0.0
    if cp > 1:  # ring attention passes K and V (forward) and their gradients (backward) around the cp ranks
        kv = 2 * 2 * lay.micro_batch_size * cfg.seq_len * cfg.kv_heads * cfg.head_dim / tp
        ring = 3 * _ring("all_gather", kv, cp, _group_bw(mach, cp, tp), cal)
        cp_comm = blocks * _exposed(ring, 3 * dense_f["attention"], cal)
    ep_comm = 0.0
    mo = cfg.moe
    if moe_blocks and lay.ep_size > 1 and mo is not None:  # moe_blocks > 0 only for an MoE model
        ep_bw = _group_bw(mach, lay.ep_size, tp)
        a2a = _ring(
            "all_to_all", 2 * T * mo.top_k * (mo.capacity_factor or 1.0) * cfg.d_model / tp, lay.ep_size, ep_bw, cal
        )
        ep_comm = moe_blocks * 4 * a2a
    pp_bw = mach.nvlink if lay.world <= mach.devices_per_node else mach.network
    p2p = (
        0.0 if pp == 1 else 2 * v * (2 * T * cfg.d_model / (tp if sp and tp > 1 else 1)) / (pp_bw * cal.comm_efficiency)
    )
    dense_p, expert_p = _stage_params(cfg, lay)
    dp_n = lay.dp * cp  # gradients are reduced over data x context parallel ranks
    dp_bw = _group_bw(mach, dp_n, tp)
    ep_dp = max(1, dp_n // lay.ep_size)
    ep_dp_bw = _group_bw(mach, ep_dp, tp * lay.ep_size)
    zero3 = 0.0
    micro_compute = compute + recompute
    if lay.zero_stage == 3:
        gathers = _ring("all_gather", 2 * 2 * dense_p, dp_n, dp_bw, cal) + _ring(
            "reduce_scatter", 2 * dense_p, dp_n, dp_bw, cal
        )
        gathers += _ring("all_gather", 2 * 2 * expert_p, ep_dp, ep_dp_bw, cal) + _ring(
            "reduce_scatter", 2 * expert_p, ep_dp, ep_dp_bw, cal
        )
        zero3 = _exposed(gathers, micro_compute, cal)
    t_micro = micro_compute + tp_comm + cp_comm + ep_comm + p2p + zero3
    bubble = (pp - 1) / v * t_micro
    pipeline = m * t_micro + bubble
    dp_comm = 0.0
    if lay.zero_stage < 3:
        kind = "all_reduce" if lay.zero_stage == 0 else "reduce_scatter"
        sync = _ring(kind, 2 * dense_p, dp_n, dp_bw, cal) + _ring(kind, 2 * expert_p, ep_dp, ep_dp_bw, cal)
        if lay.zero_stage >= 1:
            sync += _ring("all_gather", 2 * dense_p, dp_n, dp_bw, cal)
            sync += _ring("all_gather", 2 * expert_p, ep_dp, ep_dp_bw, cal)
        dp_comm = _exposed(sync, t_micro, cal)
    zero2 = 0.0
    if lay.zero_stage == 2 and m > 1:  # sharded gradients cannot accumulate locally: every micro-batch reduces
        rs = _ring("reduce_scatter", 2 * dense_p, dp_n, dp_bw, cal) + _ring(
            "reduce_scatter", 2 * expert_p, ep_dp, ep_dp_bw, cal
        )
        zero2 = (m - 1) * _exposed(rs, micro_compute, cal)  # the last one is in the step's sync above
    local = dense_p / (dp_n if lay.zero_stage >= 1 else 1) + expert_p / (ep_dp if lay.zero_stage >= 1 else 1)
    optimizer = OPTIMIZER_BYTES_PER_PARAM * local / mach.hbm
    step = pipeline + dp_comm + zero2 + optimizer
    tokens = lay.global_batch_size * cfg.seq_len
    counts = block.counts
    head_fpt = 6.0 * resolved_vocab(cfg) * cfg.d_model * (1 + mtp_depth)
    if ck == "full":
        extra = (counts.flops_per_token - head_fpt) / 3
    elif ck == "every_k":
        extra = (
            (counts.flops_per_token - head_fpt)
            / 3
            * len(range(0, blocks, lay.activation_checkpointing_k or 1))
            / blocks
        )
    elif ck == "selective":
        extra = attention_layer_flops_per_token(cfg) / 3 * L
    else:
        extra = 0.0
    world = lay.world
    mfu = counts.flops_per_token * tokens / (step * world * mach.peak)
    return {
        "step_time_s": step,
        "tokens_per_step": tokens,
        "tokens_per_s": tokens / step,
        "tokens_per_s_per_device": tokens / step / world,
        "mfu": mfu,
        "hfu": (counts.flops_per_token + extra) * tokens / (step * world * mach.peak),
        "model_flops_per_token": counts.flops_per_token,
        "hardware_flops_per_token": counts.flops_per_token + extra,
        "breakdown_s": {
            "compute": m * compute,
            "recompute": m * recompute,
            "tp_comm": m * tp_comm,
            "cp_comm_exposed": m * cp_comm,
            "ep_comm": m * ep_comm,
            "pp_p2p": m * p2p,
            "zero3_comm_exposed": m * zero3,
            "zero2_comm_exposed": zero2,
            "pp_bubble": bubble,
            "dp_comm_exposed": dp_comm,
            "optimizer": optimizer,
        },
    }


def calibration_dict(cal: Calibration = CALIBRATION) -> dict:
    return asdict(cal)
