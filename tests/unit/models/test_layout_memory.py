"""models/layout_memory.py: Korthikanti et al. 2022's activation formulas and their worked numbers, model
states sharded by TP x PP x ZeRO (and EP for experts), the pipeline's in-flight micro-batches, and the
trainer's own engine for the layouts it runs."""

from __future__ import annotations

import pytest

from models.config import ModelConfig
from models.layout_memory import (
    ParallelLayout,
    activation_bytes,
    check_layout,
    korthikanti_layer_bytes,
    layer_bytes,
    layout_memory,
    stage_params,
    state_bytes,
    zero_sharded_bytes,
)
from models.memory import estimate_memory
from models.moe.config import MoEConfig

GPT3 = ModelConfig(d_model=12288, n_layers=96, n_heads=96, d_ff=4 * 12288, vocab_size=51200, seq_len=2048)
LLAMA2_7B = ModelConfig(d_model=4096, n_layers=32, n_heads=32, d_ff=11008, vocab_size=32000, seq_len=4096)


def test_korthikanti_gpt3_worked_example():
    s, h, a, t = 2048, 12288, 96, 8
    # Sec. 4: for GPT-3 175B the attention term 5as/h is 80, more than twice the linear 34
    assert 5 * a * s / h == 80
    sbh = s * h
    assert korthikanti_layer_bytes(s, 1, h, a) == sbh * (34 + 80)
    assert korthikanti_layer_bytes(s, 1, h, a, t) == sbh * (10 + 24 / 8 + 80 / 8)
    assert korthikanti_layer_bytes(s, 1, h, a, t, sequence_parallel=True, selective=True) == sbh * 34 / 8
    # the abstract's "reduces activation memory by 5x": TP 8 alone against TP 8 + SP + selective
    ratio = korthikanti_layer_bytes(s, 1, h, a, t) / korthikanti_layer_bytes(s, 1, h, a, t, True, True)
    assert ratio == pytest.approx(23 / 4.25) and ratio > 5


@pytest.mark.parametrize("t, sp, sel", [(1, False, False), (8, False, False), (8, True, False), (8, True, True)])
def test_our_block_count_reduces_to_korthikantis_for_their_block(t, sp, sel):
    ours = layer_bytes(GPT3, 2048, t, sp, sel, gelu=True, dropout=True, flash=False)
    assert ours == pytest.approx(korthikanti_layer_bytes(2048, 1, 12288, 96, t, sp, sel))


def test_full_recompute_keeps_block_inputs_and_pipeline_holds_pp_micro_batches():
    lay = ParallelLayout(tp=8, pp=8, dp=1, micro_batch_size=1, gradient_accumulation_steps=64)
    one = layer_bytes(GPT3, 2048, 8, True)
    acts = activation_bytes(GPT3, lay)
    assert acts["in_flight_micro_batches"] == 8  # 1F1B: the first stage holds pp micro-batches
    assert acts["first_stage"] == pytest.approx(12 * one * 8)  # 96 / 8 blocks x 8 in flight
    full = activation_bytes(
        GPT3, ParallelLayout(tp=8, pp=8, gradient_accumulation_steps=64, activation_checkpointing="full")
    )
    assert full["first_stage"] == pytest.approx(12 * 2 * 2048 * 12288 / 8 * 8 + one)  # inputs + one rebuilt block
    inter = activation_bytes(GPT3, ParallelLayout(tp=8, pp=8, gradient_accumulation_steps=64, pp_interleave=2))
    assert inter["in_flight_micro_batches"] == pytest.approx(8 * (1 + 7 / 16))


def test_states_shard_over_tp_pp_and_zero():
    base = state_bytes(LLAMA2_7B, ParallelLayout(dp=8, zero_stage=0))
    assert base["optimizer"] == pytest.approx(6 * base["params"])  # 12 bytes against 2 per parameter
    z1 = state_bytes(LLAMA2_7B, ParallelLayout(dp=8, zero_stage=1))
    assert z1["optimizer"] == pytest.approx(base["optimizer"] / 8) and z1["grads"] == base["grads"]
    z3 = state_bytes(LLAMA2_7B, ParallelLayout(dp=8, zero_stage=3))
    assert z3["grads"] == pytest.approx(base["grads"] / 8) and z3["params"] < base["params"] / 4
    tp4 = state_bytes(LLAMA2_7B, ParallelLayout(tp=4, dp=2, zero_stage=0))
    assert tp4["params"] == pytest.approx(base["params"] / 4, rel=0.01)  # norms are replicated, nothing else
    pp4 = state_bytes(LLAMA2_7B, ParallelLayout(pp=4, dp=2, zero_stage=0))
    assert base["params"] / 4 < pp4["params"] < base["params"] / 3.5  # 8 blocks and the embedding on stage 1


def test_expert_parallelism_shards_the_experts():
    moe = ModelConfig(
        d_model=2048, n_layers=16, n_heads=16, vocab_size=32000, seq_len=2048,
        moe=MoEConfig(num_experts=64, top_k=2, d_ff=1024),
    )  # fmt: skip
    one = layout_memory(moe, ParallelLayout(tp=1, pp=2, dp=64, ep_size=1))
    ep = layout_memory(moe, ParallelLayout(tp=1, pp=2, dp=64, ep_size=64))
    assert ep["expert_param_bytes"] == pytest.approx(one["expert_param_bytes"] / 64)
    assert ep["per_device_bytes"]["total"] < one["per_device_bytes"]["total"]
    assert check_layout(moe, ParallelLayout(dp=8, ep_size=16)) == (
        "ep_size=16 does not divide dp=8 (expert ranks are carved out of data parallel)"
    )


def test_layouts_the_trainer_runs_are_priced_by_its_engine():
    lay = ParallelLayout(
        dp=16, zero_stage=2, micro_batch_size=2, gradient_accumulation_steps=4, activation_checkpointing="full"
    )
    got = layout_memory(LLAMA2_7B, lay, "bf16", 80 * 2**30)
    want = estimate_memory(
        LLAMA2_7B, micro_batch_size=2, zero_stage=2, world_size=16, activation_checkpointing="full",
        gradient_accumulation_steps=4, device_memory_bytes=80 * 2**30,
    )  # fmt: skip
    assert got["per_device_bytes"] == want.per_device_bytes and got["fits"] == want.fits
    assert got["engine"].startswith("scalelab trainer")
    assert layout_memory(LLAMA2_7B, ParallelLayout(tp=2, dp=8))["engine"].startswith("Megatron")


def test_fp8_keeps_matmul_inputs_in_one_byte_and_adds_a_weight_copy():
    lay = ParallelLayout(tp=8, pp=8, dp=2, gradient_accumulation_steps=16)
    bf16, fp8 = layout_memory(GPT3, lay, "bf16"), layout_memory(GPT3, lay, "fp8")
    b, f = bf16["per_device_bytes"], fp8["per_device_bytes"]
    assert f["params"] == pytest.approx(1.5 * b["params"])  # bf16 weights + their fp8 copy
    assert f["grads"] == b["grads"] and f["optimizer"] == b["optimizer"]  # what fp8 does not save
    assert f["activations"] < b["activations"]
    h, ff = 12288, 4 * 12288  # per token on 8 ranks with SP: QKV/MLP inputs (2h), o_proj (h), down_proj (f) halve
    saved = layer_bytes(GPT3, 2048, 8, True) - layer_bytes(GPT3, 2048, 8, True, fp8=True)
    assert saved == pytest.approx(2048 * (2 * h / 8 + (h + ff) / 8))
    trainer = layout_memory(LLAMA2_7B, ParallelLayout(dp=8), "fp8")
    assert trainer["engine"].startswith("Megatron")  # the trainer has no fp8


def test_context_parallel_splits_each_sequence():
    long = ModelConfig(d_model=4096, n_layers=32, n_heads=32, d_ff=11008, vocab_size=32000, seq_len=131072)
    one = activation_bytes(long, ParallelLayout(tp=8, dp=1))
    cp8 = activation_bytes(long, ParallelLayout(tp=8, cp=8, dp=1))
    assert cp8["first_stage"] == pytest.approx(one["first_stage"] / 8)
    z = state_bytes(long, ParallelLayout(tp=8, cp=8, dp=2, zero_stage=1))
    assert z["optimizer"] == pytest.approx(state_bytes(long, ParallelLayout(tp=8, dp=16, zero_stage=1))["optimizer"])
    assert ParallelLayout(tp=8, cp=8, pp=2, dp=2).world == 256
    assert "multiple of 2 x cp" in check_layout(long.model_copy(update={"seq_len": 1000}), ParallelLayout(cp=8))


def test_an_moe_models_dense_layers_keep_the_dense_width():
    from models.memory import activation_bytes as trainer_activations
    from models.memory import layer_activation_bytes

    moe = MoEConfig(num_experts=16, top_k=4, d_ff=1024, first_dense_layers=2)
    cfg = ModelConfig(d_model=1024, n_layers=8, n_heads=8, d_ff=4096, vocab_size=32000, seq_len=1024, moe=moe)
    tokens = 1024
    dense = layer_activation_bytes(cfg, tokens, "half", moe_layer=False)
    routed = layer_activation_bytes(cfg, tokens, "half")
    assert dense == layer_activation_bytes(cfg.model_copy(update={"moe": None}), tokens, "half")
    assert routed != dense
    got = trainer_activations(cfg, 1, "half")
    none = trainer_activations(cfg.model_copy(update={"moe": None}), 1, "half")
    assert got - none == 6 * (routed - dense)  # only the 6 MoE layers are wider


@pytest.mark.parametrize(
    "precision, whole, fixed, sharded", [("bf16", 18, 6, 12), ("fp32", 16, 8, 8), ("fp16", 20, 4, 16)]
)
def test_model_state_bytes_per_parameter_are_megatrons_distributed_optimizer_table(precision, whole, fixed, sharded):
    # Megatron-Core's distributed-optimizer guide: bytes per parameter without it, and fixed + sharded / d with it
    P = stage_params(LLAMA2_7B, ParallelLayout(dp=8))["dense"]
    for z, d in ((0, 8), (1, 8), (1, 64)):
        got = state_bytes(LLAMA2_7B, ParallelLayout(dp=d, zero_stage=z), precision)
        per = (got["params"] + got["grads"] + got["optimizer"]) / P
        assert per == pytest.approx(whole if z == 0 else fixed + sharded / d)


def test_zero_sharding_reproduces_the_zero_papers_worked_example():
    """Rajbhandari et al. 2020 (ZeRO, arXiv:1910.02054), Fig. 1: a 7.5B-parameter model on 64 data-parallel
    GPUs with mixed-precision Adam (2 + 2 + K bytes per parameter, K = 12) holds 120 GB per GPU, 31.4 GB with
    P_os, 16.6 GB with P_os+g and 1.9 GB with P_os+g+p (their rounding; their figure leaves out ZeRO-3's
    gather buffer, which state_bytes adds)."""
    got = [sum(zero_sharded_bytes(7.5e9, 64, z, (2, 2, 12)).values()) / 1e9 for z in range(4)]
    assert [round(x, 1) for x in got] == [120.0, 31.4, 16.6, 1.9]
    z3 = state_bytes(LLAMA2_7B, ParallelLayout(dp=64, zero_stage=3))
    P = stage_params(LLAMA2_7B, ParallelLayout(dp=64))
    assert z3["params"] == pytest.approx(2 * P["dense"] / 64 + 2 * 2 * P["largest_layer"])
