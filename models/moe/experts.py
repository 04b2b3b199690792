"""Routed experts as stacked SwiGLU weights, run over tokens already grouped by expert.

Weights are stored stacked, (E, d_ff, d_model) for gate/up and (E, d_model, d_ff) for down, with
Llama's names, so that one grouped GEMM (`torch.nn.functional.grouped_mm`) covers all experts. Its
documented domain is bf16 on CUDA devices of compute capability 8.0 or newer (a CUTLASS kernel on
9.x/10.x, torch's own per-group loop on 8.x) with 16-byte aligned rows; elsewhere (CPU, fp32,
older GPUs) each expert runs one matmul on its contiguous slice of the expert-sorted rows.
Either way there is no loop over tokens, only over the (few) local experts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

GROUPED_MM_MIN_CAPABILITY = (8, 0)


def has_grouped_mm() -> bool:
    """Whether this torch has the public grouped GEMM (torch >= 2.9)."""
    return hasattr(F, "grouped_mm")


def grouped_mm_available(x: torch.Tensor, *weights: torch.Tensor) -> bool:
    """F.grouped_mm's documented domain: bf16 on CUDA with compute capability >= 8.0, 16-byte aligned
    strides (bf16: both weight dimensions multiples of 8)."""
    if not has_grouped_mm() or not x.is_cuda or x.dtype != torch.bfloat16:
        return False
    if torch.cuda.get_device_capability(x.device) < GROUPED_MM_MIN_CAPABILITY:
        return False
    return all(w.dtype == x.dtype and w.shape[-1] % 8 == 0 and w.shape[-2] % 8 == 0 for w in weights)


class GroupedExperts(nn.Module):
    def __init__(self, num_experts: int, d_model: int, d_ff: int, grouped_mm: str = "auto"):
        super().__init__()
        self.num_experts, self.d_model, self.d_ff = num_experts, d_model, d_ff
        self.grouped_mm = grouped_mm  # "auto" | "on" | "off"
        self.gate_proj = nn.Parameter(torch.empty(num_experts, d_ff, d_model))
        self.up_proj = nn.Parameter(torch.empty(num_experts, d_ff, d_model))
        self.down_proj = nn.Parameter(torch.empty(num_experts, d_model, d_ff))
        for p in (self.gate_proj, self.up_proj, self.down_proj):
            nn.init.normal_(p, std=0.02)  # GPT.init_weights re-initialises with the model's scheme

    def use_grouped_mm(self, x: torch.Tensor) -> bool:
        if self.grouped_mm == "off":
            return False
        if self.grouped_mm == "on":  # forced, e.g. to test the CUDA path on CPU where torch has a kernel
            return has_grouped_mm()
        return grouped_mm_available(x, self.gate_proj, self.down_proj)

    def forward(self, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """x: (N, d_model) rows sorted by local expert; counts: (E_local,) rows per expert."""
        if x.shape[0] == 0:
            # Keep x and the weights in the graph: under expert parallelism every rank must run the
            # backward all-to-all even when it received no tokens.
            return x.new_zeros(0, self.d_model) + 0 * (x.sum() + self.down_proj.sum())
        if self.use_grouped_mm(x):
            return self._grouped(x, counts)
        return self._slices(x, counts)

    def _grouped(self, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        # offs[i] ends expert i's rows; the (E, N, K) weights are passed as (E, K, N) views, the
        # column-major right operand the kernel expects (out = x @ W.T per group).
        offs = torch.cumsum(counts, 0).to(torch.int32)
        gate = F.grouped_mm(x, self.gate_proj.transpose(-2, -1), offs=offs)
        up = F.grouped_mm(x, self.up_proj.transpose(-2, -1), offs=offs)
        h = (F.silu(gate) * up).contiguous()
        return F.grouped_mm(h, self.down_proj.transpose(-2, -1), offs=offs)

    def _slices(self, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        # unbind: one backward op per weight instead of a full-size zero gradient per expert index.
        gates, ups, downs = self.gate_proj.unbind(0), self.up_proj.unbind(0), self.down_proj.unbind(0)
        outs = []
        for e, xe in enumerate(torch.split(x, counts.tolist())):
            if xe.shape[0] == 0:
                continue
            h = F.silu(F.linear(xe, gates[e])) * F.linear(xe, ups[e])
            outs.append(F.linear(h, downs[e]))
        return torch.cat(outs) if outs else x.new_zeros(0, self.d_model)
