"""Router health metrics: key names, values and the console line."""
from __future__ import annotations

import pytest
import torch

from models.config import ModelConfig
from models.gpt import GPT
from models.moe.metrics import console_summary, summarize


def test_summarize_values_by_hand():
    stats = [{"layer": 1, "router": "softmax_topk", "load": torch.tensor([3.0, 1.0, 0.0, 0.0]),
              "dropped_frac": torch.tensor(0.25), "entropy": torch.tensor(1.0),
              "aux_loss": torch.tensor(1.5), "z_loss": torch.tensor(2.0)}]
    m = summarize(stats)
    assert m["moe/layer1/load/expert0"] == 0.75 and m["moe/layer1/load/expert3"] == 0.0
    assert m["moe/layer1/imbalance"] == pytest.approx(3.0)  # 0.75 / 0.25
    assert m["moe/layer1/cv"] == pytest.approx((0.09375 ** 0.5) / 0.25)
    assert m["moe/imbalance"] == m["moe/max_imbalance"] == pytest.approx(3.0)
    assert m["moe/dropped_frac"] == 0.25 and m["moe/aux_loss"] == 1.5 and m["moe/z_loss"] == 2.0
    assert all(isinstance(v, float) for v in m.values())
    line = console_summary(m)
    assert line.startswith("moe imb 3.00/3.00") and "drop 25.0%" in line and len(line) < 100


@pytest.mark.parametrize("router", ["softmax_topk", "aux_free_bias", "expert_choice", "sinkhorn"])
def test_model_stats_give_all_keys(router):
    cfg = ModelConfig(d_model=32, n_layers=3, n_heads=2, vocab_size=64, seq_len=16,
                      moe={"num_experts": 4, "top_k": 2, "d_ff": 16, "router": router, "first_dense_layers": 1,
                           "capacity_factor": 1.0})
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
