"""Router health metrics: key names, values and the console line."""

from __future__ import annotations

import pytest
import torch

from models.config import ModelConfig
from models.gpt import GPT
from models.moe.metrics import console_summary, summarize


def test_summarize_values_by_hand():
    stats = [
        {
            "layer": 1,
            "router": "softmax_topk",
            "load": torch.tensor([3.0, 1.0, 0.0, 0.0]),
            "dropped_frac": torch.tensor(0.25),
            "entropy": torch.tensor(1.0),
            "aux_loss": torch.tensor(1.5),
            "z_loss": torch.tensor(2.0),
        }
    ]
    m = summarize(stats)
    assert m["moe/layer1/load/expert0"] == 0.75 and m["moe/layer1/load/expert3"] == 0.0
    assert m["moe/layer1/imbalance"] == pytest.approx(3.0)  # 0.75 / 0.25
    assert m["moe/layer1/cv"] == pytest.approx((0.09375**0.5) / 0.25)
    assert m["moe/imbalance"] == m["moe/max_imbalance"] == pytest.approx(3.0)
    assert m["moe/dropped_frac"] == 0.25 and m["moe/aux_loss"] == 1.5 and m["moe/z_loss"] == 2.0
    assert all(isinstance(v, float) for v in m.values())
    line = console_summary(m)
    assert line.startswith("moe imb 3.00/3.00") and "drop 25.0%" in line and len(line) < 100


@pytest.mark.parametrize("router", ["softmax_topk", "aux_free_bias", "expert_choice", "sinkhorn"])
def test_model_stats_give_all_keys(router):
    cfg = ModelConfig(
        d_model=32,
        n_layers=3,
        n_heads=2,
        vocab_size=64,
        seq_len=16,
        moe={
            "num_experts": 4,
            "top_k": 2,
            "d_ff": 16,
            "router": router,
            "first_dense_layers": 1,
            "capacity_factor": 1.0,
        },
    )
    ids = torch.randint(0, 64, (2, 16))
    m = summarize(GPT(cfg)(ids, ids).router_stats)
    for i in (1, 2):
        for j in range(4):
            assert f"moe/layer{i}/load/expert{j}" in m
        for k in ("imbalance", "cv", "dropped_frac", "entropy", "z_loss"):
            assert f"moe/layer{i}/{k}" in m
    assert "moe/layer0/imbalance" not in m  # dense layer
    for k in ("imbalance", "max_imbalance", "dropped_frac", "entropy", "z_loss"):
        assert f"moe/{k}" in m
    if router in ("softmax_topk", "aux_free_bias"):
        assert "moe/aux_loss" in m
    assert ("moe/bias_norm" in m) == (router == "aux_free_bias")
    assert sum(m[f"moe/layer1/load/expert{j}"] for j in range(4)) == pytest.approx(1.0)
    assert console_summary(m).startswith("moe imb")


def test_console_summary_empty_without_moe():
    assert console_summary({"loss": 1.0}) == ""


def _stats(load, tokens, dropped, of, entropy, z, layer=1):
    return {
        "layer": layer,
        "router": "softmax_topk",
        "load": torch.tensor(load, dtype=torch.float32),
        "dropped_frac": torch.tensor(dropped / of),
        "dropped": torch.tensor(dropped),
        "dropped_of": of,
        "tokens": tokens,
        "entropy": torch.tensor(entropy),
        "z_loss": torch.tensor(z),
    }


def test_a_step_sums_counts_over_micro_batches_and_ranks_before_deriving():
    """2 micro-batches on each of 2 ranks: loads and drops are summed, then imbalance and the
    dropped fraction derived; per-token means weight each micro-batch by its tokens."""
    from models.moe.metrics import merge, summarize_totals, totals

    rank0 = [[_stats([3, 1], 2, 1, 4, 0.5, 1.0)], [_stats([1, 3], 2, 0, 4, 0.7, 3.0)]]
    rank1 = [[_stats([4, 0], 2, 2, 4, 0.1, 2.0)], [_stats([2, 2], 6, 1, 4, 0.9, 2.0)]]
    m = summarize_totals(merge(totals(rank0), totals(rank1)))
    assert m["moe/layer1/load/expert0"] == pytest.approx(10 / 16) and m["moe/layer1/load/expert1"] == pytest.approx(
        6 / 16
    )
    assert m["moe/layer1/imbalance"] == pytest.approx((10 / 16) / 0.5)  # not rank 0's last micro-batch (1.5)
    assert m["moe/layer1/cv"] == pytest.approx((2 / 16) / 0.5)
    assert m["moe/layer1/dropped_frac"] == pytest.approx(4 / 16)
    assert m["moe/layer1/entropy"] == pytest.approx((0.5 * 2 + 0.7 * 2 + 0.1 * 2 + 0.9 * 6) / 12)
    assert m["moe/layer1/z_loss"] == pytest.approx((1.0 * 2 + 3.0 * 2 + 2.0 * 2 + 2.0 * 6) / 12)
    assert m["moe/imbalance"] == m["moe/max_imbalance"] == pytest.approx(1.25)


def test_metrics_of_a_split_batch_equal_those_of_the_whole_batch():
    """The same 4 sequences routed as 2 ranks x 2 micro-batches or in one forward (dropless
    token choice: a token's routing does not depend on the others) give the same metrics."""
    from models.moe.metrics import merge, summarize, summarize_totals, totals

    cfg = ModelConfig(
        d_model=32,
        n_layers=2,
        n_heads=2,
        vocab_size=64,
        seq_len=16,
        moe={"num_experts": 4, "top_k": 2, "d_ff": 16, "router": "softmax_topk", "capacity_factor": None},
    )
    torch.manual_seed(0)
    model = GPT(cfg)
    ids = torch.randint(0, 64, (4, 16))
    whole = summarize(model(ids, ids).router_stats)
    parts = [model(ids[i : i + 1], ids[i : i + 1]).router_stats for i in range(4)]
    split = summarize_totals(merge(totals(parts[:2]), totals(parts[2:])))
    for k, v in whole.items():
        # the balance loss is a product of batch means (not additive); imbalance_micro is per micro-batch by design
        if "aux_loss" not in k and "imbalance_micro" not in k:
            assert split[k] == pytest.approx(v, rel=1e-5, abs=1e-7), k
