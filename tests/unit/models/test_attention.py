"""Attention through SDPA: grouped K/V heads read natively (`enable_gqa`) give the same outputs,
bit for bit, as expanding K/V by repeat_interleave (the previous path), in training and in cached
decoding. Gradients agree to float32 rounding only: the K/V gradient is a sum over each group's
query heads, which SDPA's backward and repeat_interleave's backward add in different orders."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import models.layers as layers
from models.config import ModelConfig
from models.gpt import GPT, KVCache

pytestmark = pytest.mark.skipif(not layers.SDPA_GQA, reason="this torch has no enable_gqa")


def _cfg(**kw) -> ModelConfig:
    return ModelConfig(
        **{"d_model": 64, "n_layers": 2, "n_heads": 8, "n_kv_heads": 2, "vocab_size": 256, "seq_len": 32, **kw}
    )


def _loss_and_grads(model, x, y):
    model.zero_grad()
    out = model(x, targets=y)
    out.loss.backward()
    return out.logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_native_gqa_is_used_on_cpu_and_only_for_low_precision_on_cuda():
    q = torch.zeros(1, 8, 4, 8)
    assert layers.native_gqa(q) and layers.native_gqa(q.bfloat16())


@pytest.mark.parametrize("kv_heads", [1, 2, 8])
def test_grouped_heads_match_the_expanded_path(kv_heads, monkeypatch):
    torch.manual_seed(0)
    model = GPT(_cfg(n_kv_heads=kv_heads))
    x = torch.randint(0, 256, (3, 32))
    y = torch.randint(0, 256, (3, 32))
    calls = []
    sdpa = F.scaled_dot_product_attention

    def spy(q, k, v, **kw):
        calls.append((q.shape[1], k.shape[1], kw.get("enable_gqa", False)))
        return sdpa(q, k, v, **kw)

    monkeypatch.setattr(layers.F, "scaled_dot_product_attention", spy)
    logits, grads = _loss_and_grads(model, x, y)
    assert all(kh == kv_heads and gqa == (kv_heads < 8) for _, kh, gqa in calls)  # K/V never expanded
    monkeypatch.setattr(layers, "native_gqa", lambda q: False)  # the repeat_interleave path
    calls.clear()
    ref_logits, ref_grads = _loss_and_grads(model, x, y)
    assert all(kh == 8 and not gqa for _, kh, gqa in calls)
    assert torch.equal(logits, ref_logits)
    for n in grads:  # summation order of the grouped K/V gradient: ~1e-7 of the tensor's scale
        torch.testing.assert_close(grads[n], ref_grads[n], rtol=1e-5, atol=1e-6 * float(ref_grads[n].abs().max()))


def test_cached_decoding_matches_the_expanded_path(monkeypatch):
    torch.manual_seed(1)
    model = GPT(_cfg()).eval()
    ids = torch.randint(0, 256, (2, 12))

    def decode():
        caches = [KVCache() for _ in range(model.cfg.n_layers)]
        with torch.no_grad():
            outs = [model(ids[:, :8], kv_caches=caches).logits]
            outs += [model(ids[:, i : i + 1], kv_caches=caches).logits for i in range(8, 12)]
        return torch.cat(outs, dim=1)

    native = decode()
    monkeypatch.setattr(layers, "native_gqa", lambda q: False)
    assert torch.equal(native, decode())
    with torch.no_grad():  # and the cached decode equals one full causal forward
        assert torch.allclose(native, model(ids).logits, atol=1e-5)


def test_flash_attention_comes_first_in_torchs_kernel_order():
    """models/layers.attend lets torch pick the kernel because its default order already prefers
    flash attention; if a torch release changes that, this says so."""
    from torch.nn.attention import SDPBackend

    order = list(torch._C._get_sdp_priority_order())
    assert order.index(int(SDPBackend.FLASH_ATTENTION)) < min(
        order.index(int(SDPBackend.EFFICIENT_ATTENTION)),
        order.index(int(SDPBackend.MATH)),
        order.index(int(SDPBackend.CUDNN_ATTENTION)),
    )
