"""Scoring and decoding run the backbone themselves (evals/forward.py): under mup they must apply the
model's attention scale and logit multiplier (GPT.head), or log-probs differ from the model's."""

from __future__ import annotations

import torch

from evals.forward import backbone, hidden_states
from evals.requests import _target_logprobs
from models.gpt import KVCache
from tests.helpers import tiny_model, tiny_model_config


@torch.no_grad()
def test_backbone_hidden_states_and_head_equal_the_mup_model_logits():
    model = tiny_model(tiny_model_config(300, d_model=64, parametrization="mup", mup_base_width=16))
    ids = torch.randint(0, 300, (2, 17))
    logits = model(ids).logits
    torch.testing.assert_close(model.head(hidden_states(model, ids)), logits, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(model.head(backbone(model, ids)[0]), logits, rtol=1e-5, atol=1e-6)
    caches = [KVCache() for _ in model.model.layers]
    hidden_states(model, ids[:1, :9], caches)
    h = hidden_states(model, ids[:1, 9:10], caches)
    torch.testing.assert_close(model.head(h)[0, -1], model(ids[:1, :10]).logits[0, -1], rtol=1e-5, atol=1e-6)
    feats, targets = hidden_states(model, ids)[0], ids[0]
    lp, _ = _target_logprobs(model, feats, targets)
    want = logits[0].log_softmax(-1).gather(1, targets[:, None])[:, 0].double().numpy()
    assert abs(lp - want).max() < 1e-5
