"""models/memory.py: model states equal DeepSpeed's own estimators (bf16 + AdamW), activations equal
what autograd saves, Muon's split equals the trainer's, and the layout chooser's decisions."""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch

from models.accounting import model_counts
from models.config import ModelConfig
from models.memory import (
    CPU_REDUCE_BUCKET,
    GIB,
    HEADROOM,
    LOGIT_BUFFERS,
    activation_bytes,
    choose_layout,
    estimate_memory,
    layer_activation_bytes,
    model_state_bytes,
    param_split,
)

LLAMA2_7B = ModelConfig(d_model=4096, n_layers=32, n_heads=32, d_ff=11008, vocab_size=32000, seq_len=4096)
LLAMA2_70B = ModelConfig(
    d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, d_ff=28672, vocab_size=32000, seq_len=4096
)


@pytest.mark.parametrize("cfg", [LLAMA2_7B, LLAMA2_70B], ids=["llama-2-7b", "llama-2-70b"])
@pytest.mark.parametrize("gpus, nodes", [(1, 1), (8, 1), (7, 1), (8, 8), (4, 3)])
def test_bf16_adamw_model_states_equal_deepspeeds_estimators(cfg, gpus, nodes):
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    p = param_split(cfg)
    n = gpus * nodes
    _, z2 = estimate_zero2_model_states_mem_needs(p.total, gpus, nodes, cpu_offload=False)
    assert sum(model_state_bytes(p, 2, n, "bf16").values()) == z2
    # estimate_zero3_model_states_mem_needs_all_cold prints this function's numbers for the options it loops over
    _, z3, _ = estimate_zero3_model_states_mem_needs(
        p.total, p.largest_layer, gpus, nodes, cpu_offload=False, cpu_offload_params=False, zero_init=True
    )
    assert sum(model_state_bytes(p, 3, n, "bf16").values()) == z3


def test_deepspeeds_largest_layer_is_ours():
    from deepspeed.runtime.zero.stage3 import model_to_params

    from models.gpt import GPT

    cfg = ModelConfig(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=96, vocab_size=300, seq_len=32)
    total, largest = model_to_params(GPT(cfg))  # (not on the meta device: it tells tensors apart by data_ptr)
    p = param_split(cfg)
    assert (p.total, p.largest_layer) == (model_counts(cfg).total, largest) and total == p.total


def test_engine_differences_are_accounted():
    p = param_split(LLAMA2_7B)
    P = p.total
    # fp32 (CPU runs): 16 bytes per parameter at ZeRO-0; ZeRO keeps an fp32 master copy even of fp32 weights
    assert sum(model_state_bytes(p, 0, 1, "fp32").values()) == 16 * P
    assert sum(model_state_bytes(p, 1, 1, "fp32").values()) == 24 * P
    # bf16 ZeRO-0 keeps fp32 weights and grads and autocasts the matmul weights; ZeRO-1 is BF16_Optimizer
    z0 = model_state_bytes(p, 0, 8, "bf16")
    assert z0 == {"params": 4 * P + 2 * p.matmul, "grads": 4 * P, "optimizer": 8 * P}
    assert model_state_bytes(p, 1, 8, "bf16") == {"params": 2 * P, "grads": 4 * P, "optimizer": 12 * P // 8}
    # muon: DeepSpeed's ZeRO-0 engine whatever the stage; one momentum per Muon matrix, two AdamW moments else
    m0 = model_state_bytes(p, 0, 8, "bf16", "muon")
    assert m0["optimizer"] == 4 * p.muon + 8 * (P - p.muon) and m0["grads"] == 4 * P
    m1 = model_state_bytes(p, 1, 8, "bf16", "muon")
    assert m1["optimizer"] == m0["optimizer"] // 8 + 8 * p.largest_tensor and m1["params"] == m0["params"]
    e = estimate_memory(LLAMA2_7B, micro_batch_size=1, zero_stage=1, world_size=8, optimizer="muon")
    assert e.engine_zero_stage == 0 and any("ZeRO-0 engine" in n for n in e.notes)


def test_muon_split_is_the_trainers():
    from models.gpt import GPT
    from pretrain.optim.muon_build import is_muon_param

    cfg = ModelConfig(d_model=64, n_layers=3, n_heads=4, vocab_size=300, seq_len=32, tie_embeddings=True)
    with torch.device("meta"):
        model = GPT(cfg)
    seen, muon = set(), 0
    for name, q in model.named_parameters():
        if id(q) not in seen:
            seen.add(id(q))
            muon += q.numel() if is_muon_param(name, q) else 0
    assert param_split(cfg).muon == muon


def test_cpu_buckets_are_the_trainers():
    from pretrain.engine.ds_config import CPU_BUCKET

    assert CPU_REDUCE_BUCKET == CPU_BUCKET
    e = estimate_memory(
        LLAMA2_7B.model_copy(update={"seq_len": 256}), micro_batch_size=1, zero_stage=2, precision="fp32", device="cpu"
    )
    assert e.per_device_bytes["other"] == 4 * CPU_BUCKET and any("CPU: ZeRO buckets" in n for n in e.notes)


# ------------------------------------------------------------------ activations: what autograd saves
def _saved_bytes(fn, exclude: set[int], min_bytes: int = 0) -> int:
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in exclude and st.nbytes() >= min_bytes:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


@pytest.mark.parametrize("kv", [4, 1])
@pytest.mark.parametrize("mode", ["fp32", "half", "autocast"])
def test_block_activations_are_what_autograd_saves(mode, kv):
    from models.gpt import GPT

    cfg = ModelConfig(d_model=128, n_layers=2, n_heads=4, n_kv_heads=kv, vocab_size=512, seq_len=64)
    torch.manual_seed(0)
    model = GPT(cfg)
    if mode == "half":
        model = copy.deepcopy(model).to(torch.bfloat16)
    x = torch.randint(0, 512, (4, 64))
    h = model.model.embed_tokens(x).detach().requires_grad_(True)
    cos, sin = model.rope_cos.to(h.dtype), model.rope_sin.to(h.dtype)
    # weights, the rope tables, and (autocast) the bf16 weight copies, which the model states count
    exclude = {t.untyped_storage().data_ptr() for t in [*model.parameters(), cos, sin]}
    weight_shapes = {s for q in model.parameters() for s in (tuple(q.shape), tuple(q.shape)[::-1])}
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if mode == "autocast" else contextlib.nullcontext()

    def block():
        return model.model.layers[0](h, cos, sin)

    if mode == "autocast":  # leave out the casts of weights (saved transposed): never a token's shape here
        seen: dict[int, int] = {}

        def pack(t):
            st = t.untyped_storage()
            if st.data_ptr() not in exclude and tuple(t.shape) not in weight_shapes:
                seen[st.data_ptr()] = st.nbytes()
            return t

        with ctx, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            block()
        saved = sum(seen.values())
    else:
        saved = _saved_bytes(block, exclude)
    assert saved == layer_activation_bytes(cfg, 4 * 64, mode, device="cpu")


def test_model_activations_add_the_final_norm_and_the_loss():
    from models.gpt import GPT

    cfg = ModelConfig(d_model=128, n_layers=3, n_heads=4, vocab_size=512, seq_len=64)
    model = GPT(cfg)
    x, y = torch.randint(0, 512, (4, 64)), torch.randint(0, 512, (4, 64))
    exclude = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    saved = _saved_bytes(lambda: model(x, targets=y).loss, exclude)
    tokens = 4 * 64
    # the estimate's peak holds two more fp32 (tokens x vocab) buffers than autograd saves (backward's first steps);
    # autograd also keeps the token ids and targets (int64) and a scalar or two, which the estimate leaves out
    est = activation_bytes(cfg, 4, "fp32", device="cpu") - (LOGIT_BUFFERS - 1) * 4 * 512 * tokens
    assert 0 <= saved - 2 * 8 * tokens - est <= 16


def test_activation_checkpointing_keeps_block_inputs():
    cfg = LLAMA2_7B
    none = activation_bytes(cfg, 1, "half")
    full = activation_bytes(cfg, 1, "half", "full")
    every2 = activation_bytes(cfg, 1, "half", "every_k", 2)
    assert full < every2 < none
    tokens = cfg.seq_len
    block = layer_activation_bytes(cfg, tokens, "half")
    logits = LOGIT_BUFFERS * 4 * cfg.vocab_size * tokens
    assert full - (32 * 2 * 4096 * tokens + max(logits, block)) == none - (32 * block + logits)  # the same final norm


# ------------------------------------------------------------------ layout
def test_layout_picks_the_smallest_stage_then_the_largest_micro_batch():
    lay = choose_layout(LLAMA2_7B, global_batch_size=512, device_memory_bytes=80 * GIB, nodes=1, devices_per_node=8)
    e = lay.estimate
    assert lay.fits and e.activation_checkpointing == "none"
    assert e.micro_batch_size * e.gradient_accumulation_steps * 8 == 512
    usable = (1 - HEADROOM) * 80 * GIB
    for stage in range(e.zero_stage):  # no smaller stage fits at any micro-batch without checkpointing
        e0 = estimate_memory(LLAMA2_7B, micro_batch_size=1, zero_stage=stage, world_size=8)
        assert e0.per_device_bytes["total"] > usable
    bigger = [m for m in range(e.micro_batch_size + 1, 65) if 64 % m == 0]
    if bigger:  # the next micro-batch that divides the per-rank batch does not fit
        assert (
            estimate_memory(
                LLAMA2_7B, micro_batch_size=bigger[0], zero_stage=e.zero_stage, world_size=8
            ).per_device_bytes["total"]
            > usable
        )
    d = lay.to_dict()
    assert set(d["per_device_bytes"]) == {"params", "grads", "optimizer", "activations", "other", "total"}
    assert {
        "device_memory_bytes",
        "zero_stage",
        "micro_batch_size",
        "activation_checkpointing",
        "gradient_accumulation_steps",
        "fits",
        "nodes",
        "devices_per_node",
    } <= set(d)


def test_layout_checkpoints_only_when_needed_and_says_when_nothing_fits():
    # 70B on one node of 80 GB: even ZeRO-3 + full checkpointing at micro-batch 1 needs ~160 GB per GPU
    lay = choose_layout(LLAMA2_70B, global_batch_size=64, device_memory_bytes=80 * GIB, nodes=1, devices_per_node=8)
    assert not lay.fits and "tensor or pipeline parallelism" in lay.reason
    assert lay.estimate.zero_stage == 3 and lay.estimate.activation_checkpointing == "full"
    # on 8 nodes the states fit at ZeRO-3; 4096-token sequences then need checkpointing
    lay = choose_layout(LLAMA2_70B, global_batch_size=256, device_memory_bytes=80 * GIB, nodes=8, devices_per_node=8)
    assert lay.fits and lay.estimate.zero_stage == 3
    assert lay.estimate.activation_checkpointing != "none"
    assert estimate_memory(LLAMA2_70B, micro_batch_size=1, zero_stage=3, world_size=64).fits is None  # no device given
    with pytest.raises(ValueError, match="not a multiple of the 64 devices"):
        choose_layout(LLAMA2_70B, global_batch_size=100, device_memory_bytes=80 * GIB, nodes=8, devices_per_node=8)
