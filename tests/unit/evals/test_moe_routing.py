"""Expert-choice validation loss is computed with the routing used in training (issue 18): the
held-out evaluation in eval mode equals a training-mode forward over the same batches (the model
has no dropout), and differs from the causal token-choice routing that generation and lm-eval use."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.config import ModelConfig
from models.gpt import GPT
from models.moe.routers import set_causal_routing
from pretrain.evaluation import HeldOutEval

SEQ, BATCH = 16, 4
TOKENS = np.random.default_rng(0).integers(0, 64, size=SEQ * 40 + 1).astype(np.uint16)


def expert_choice_model() -> GPT:
    cfg = ModelConfig(
        d_model=32,
        n_layers=2,
        n_heads=2,
        vocab_size=64,
        seq_len=SEQ,
        init_std=0.2,
        moe={"num_experts": 4, "top_k": 2, "d_ff": 32, "router": "expert_choice", "capacity_factor": 1.0},
    )
    torch.manual_seed(0)
    return GPT(cfg)


def training_mode_loss(model: GPT, ev: HeldOutEval) -> float:
    """Mean token loss of train-mode forwards over the evaluation's own batches."""
    model.train()
    nats, count = 0.0, 0
    with torch.no_grad():
        for batch in ev.batches(0, 1):
            rows = torch.from_numpy(np.stack([TOKENS[s : s + SEQ + 1].astype(np.int64) for _, s in batch]))
            out = model(rows[:, :-1], targets=rows[:, 1:], logits=False)
            nats += out.loss.double().item() * rows[:, 1:].numel()
            count += rows[:, 1:].numel()
    return nats / count


def test_expert_choice_val_loss_uses_training_routing():
    model = expert_choice_model()
    ev = HeldOutEval(TOKENS, SEQ, 10 * SEQ, bytes_per_token=1.0, batch_size=BATCH)  # batches of 4, 4, 2 windows
    val = ev.run(model, torch.device("cpu"))["val_loss"]
    assert val == pytest.approx(training_mode_loss(model, ev), rel=1e-9)
    set_causal_routing(model)  # what generation and lm-eval use: token-choice top-k, a different function
    causal = ev.run(model, torch.device("cpu"))["val_loss"]
    assert abs(causal - val) > 1e-3, (causal, val)
