"""The model's CUDA paths on a GPU (`cuda` mark; skipped without CUDA; benchmarks/gpu_check.py runs
them on a GPU node): SDPA with grouped K/V heads on the flash kernel, and the GPU terms of the
memory estimate (models/memory.py): what a block saves for backward on CUDA, K/V expanded for fp32,
and the CUDA context and cuBLAS workspace the estimate's `other` reserves."""

from __future__ import annotations

import contextlib
import copy
import os

import pytest
import torch
import torch.nn.functional as F

import models.layers as layers
from models.config import ModelConfig
from models.memory import GPU_CONTEXT_BYTES, layer_activation_bytes

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.skipif(not layers.SDPA_GQA, reason="this torch has no enable_gqa")
def test_grouped_heads_run_on_the_flash_kernel_and_match_expanded_math():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    q = torch.randn(2, 8, 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 2, 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(2, 2, 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    assert layers.native_gqa(q) and not layers.native_gqa(q.float())
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):  # flash only: fails if it cannot take grouped heads
        y = layers.attend(q, k, v, causal=True)
        y.float().square().sum().backward()
    qf, kf, vf = (t.detach().float().requires_grad_(True) for t in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(
            qf, kf.repeat_interleave(4, dim=1), vf.repeat_interleave(4, dim=1), is_causal=True
        )
        ref.square().sum().backward()
    torch.testing.assert_close(y.float(), ref, atol=2e-2, rtol=2e-2)
    for got, want in ((q.grad, qf.grad), (k.grad, kf.grad), (v.grad, vf.grad)):
        torch.testing.assert_close(got.float(), want, atol=5e-2 * float(want.abs().max()), rtol=5e-2)
    # fp32 on CUDA expands K/V and runs on the memory-efficient kernel (no math fallback)
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        y32 = layers.attend(qf.detach(), kf.detach(), vf.detach(), causal=True)
    torch.testing.assert_close(y32, ref.detach(), atol=1e-4, rtol=1e-4)


def _saved_bytes(fn, exclude: set[int], skip_shapes=frozenset(), min_bytes: int = 64) -> int:
    """Bytes of the distinct storages autograd saves; scalars (the kernels' RNG seed and offset) left out."""
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in exclude and st.nbytes() >= min_bytes and tuple(t.shape) not in skip_shapes:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


@pytest.mark.parametrize("mode", ["fp32", "half", "autocast"])
def test_block_activations_on_cuda_are_what_the_estimate_counts(mode):
    """As tests/unit/models/test_memory.py on CPU, with the CUDA kernels' saved tensors: fp32 with
    grouped heads counts the expanded K/V (device="cuda")."""
    from models.gpt import GPT

    cfg = ModelConfig(d_model=128, n_layers=2, n_heads=4, n_kv_heads=1, vocab_size=512, seq_len=64)
    torch.manual_seed(0)
    model = GPT(cfg).cuda()
    if mode == "half":
        model = copy.deepcopy(model).to(torch.bfloat16)
    x = torch.randint(0, 512, (4, 64), device="cuda")
    h = model.model.embed_tokens(x).detach().requires_grad_(True)
    cos, sin = model.rope_cos.to(h.dtype), model.rope_sin.to(h.dtype)
    exclude = {t.untyped_storage().data_ptr() for t in [*model.parameters(), cos, sin]}
    weights = {s for p in model.parameters() for s in (tuple(p.shape), tuple(p.shape)[::-1])}
    ctx = torch.autocast("cuda", dtype=torch.bfloat16) if mode == "autocast" else contextlib.nullcontext()

    def block():
        with ctx:
            model.model.layers[0](h, cos, sin)

    saved = _saved_bytes(block, exclude, weights if mode == "autocast" else frozenset())
    want = layer_activation_bytes(cfg, 4 * 64, mode, device="cuda")
    assert saved == pytest.approx(want, rel=0.01), (mode, saved, want)


def _own_device_bytes() -> int | None:
    """This process's memory on the GPU as the driver counts it (NVML), or None where unreadable; other
    processes (pytest-xdist workers on the same GPU) are not counted, unlike torch.cuda.mem_get_info."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == os.getpid():
                return int(proc.usedGpuMemory)
    except pynvml.NVMLError:
        return None
    return None


def test_cuda_context_and_workspaces_fit_the_estimates_reserve():
    """models/memory.py reserves GPU_CONTEXT_BYTES (1 GiB) per GPU for what the caching allocator does
    not see: the CUDA context and cuBLAS workspaces (NCCL's buffers come with process groups)."""
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    (a @ a).float().sum().item()
    used = _own_device_bytes()
    if used is None:
        pytest.skip("this process's GPU memory is not readable through NVML here")
    outside = used - torch.cuda.memory_reserved()
    assert 0 < outside <= GPU_CONTEXT_BYTES, f"{outside / 2**20:.0f} MiB outside the allocator"
