"""Transformer building blocks with Llama's parameter layout (so HF export is a rename-free copy)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from models.config import ModelConfig
from models.mup import attention_scale, init_std, is_mup


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in fp32 for bf16 stability, as Llama does.
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rope_tables(head_dim: int, seq_len: int, theta: float, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of shape (seq_len, head_dim) in HF Llama's rotate-half convention."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim))
    t = torch.arange(seq_len, dtype=torch.float32, device=device)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (batch, heads, seq, head_dim); cos/sin: (seq, head_dim)."""
    return (x * cos + _rotate_half(x) * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv, self.hd = cfg.n_heads, cfg.kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_heads * self.hd, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, self.n_kv * self.hd, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, self.n_kv * self.hd, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * self.hd, cfg.d_model, bias=False)
        # None: SDPA's own 1/sqrt(head_dim) (sp, bit for bit as before); mup's scale: models/mup.py
        self.scale = attention_scale(cfg) if is_mup(cfg) else None

    def forward(self, x, cos, sin, kv_cache=None):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.n_kv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv, self.hd).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        causal = True
        if kv_cache is not None:
            k, v = kv_cache.update(k, v)
            # A single new token attends to everything cached; a prefill uses the causal mask.
            causal = t > 1 and k.shape[2] == t
            if t > 1 and k.shape[2] != t:
                raise ValueError("multi-token decode steps after a prefill are not supported")
        y = attend(q, k, v, causal, self.scale)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


SDPA_GQA = "enable_gqa" in (F.scaled_dot_product_attention.__doc__ or "")  # torch >= 2.5


def native_gqa(q: torch.Tensor) -> bool:
    """Whether SDPA takes fewer K/V heads than query heads itself (`enable_gqa`) for these inputs.

    Of torch's CUDA kernels only flash attention (fp16/bf16) and the math fallback read grouped K/V
    heads; the memory-efficient kernel (the one fp32 CUDA inputs get) does not, and with
    `enable_gqa` an fp32 CUDA call would fall back to the math kernel, which materialises the full
    (T, T) scores. There, K/V are expanded instead. On CPU both give the same bits (tested)."""
    return SDPA_GQA and (not q.is_cuda or q.dtype in (torch.float16, torch.bfloat16))


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None = None) -> torch.Tensor:
    """Causal (or, for one decoded token, full) attention; q: (B, H, T, D), k/v: (B, H_kv, S, D);
    `scale`: of the scores (None: SDPA's 1/sqrt(D)).

    The kernel is torch's choice: its default priority (torch 2.13) is flash, memory-efficient,
    math, cuDNN, so bf16/fp16 CUDA inputs run flash attention where its constraints hold and fall
    back, rather than fail, where they do not (fp32, head_dim > 256). No `sdpa_kernel` context is
    entered per call: it would only restate that order and cost a Python context per layer."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1 and not native_gqa(q):
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    elif rep > 1:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


class SwiGLU(nn.Module):
    """Dense FFN. Returns (y, None): every block FFN returns (output, aux), aux being the MoE
    router's losses and statistics where there is a router (`models.moe.block.MoEFeedForward`)."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x)), None


def init_weights(module: nn.Module, cfg: ModelConfig) -> None:
    """Normal(0, std) for every matrix, std from `models.mup.init_std`: init_std, residual output
    projections scaled by 1/sqrt(2 L) (GPT-2), hidden matrices by 1/sqrt(width ratio) under mup.

    Written as one `Module.apply` over each module's own parameters, the documented way to
    initialise a model that is partitioned while it is built: DeepSpeed's ZeRO-3 `zero.Init` (used
    by pretrain/, never named here) gathers each module's parameters around the applied function
    and re-partitions them after it. `apply` visits children before their parent; no module here
    holds matrices beside sub-modules with parameters, so the draws come in `named_parameters()`
    order, as before `apply` was used (the same weights for a seed)."""
    names = {id(m): prefix for prefix, m in module.named_modules()}

    def init(m: nn.Module) -> None:
        prefix = names.get(id(m), "")
        for local, p in m.named_parameters(recurse=False):
            name = f"{prefix}.{local}" if prefix else local
            if p.dim() < 2:
                continue
            shape = tuple(getattr(p, "ds_shape", None) or p.shape)  # ZeRO-3 zero.Init: gathered, but be safe
            with torch.no_grad():
                nn.init.normal_(p, mean=0.0, std=init_std(cfg, name, shape))

    module.apply(init)
