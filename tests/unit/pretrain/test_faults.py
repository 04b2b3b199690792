"""Training fault paths through `scalelab train`: unloadable checkpoints stop the run without deleting
anything, a ZeRO run resumes on another world size, and non-finite gradients never reach the weights."""

from __future__ import annotations


def test_weights_finite_sees_inf_and_nan():
    import torch

    from models.config import ModelConfig
    from models.gpt import GPT
    from pretrain.checkpoint.store import weights_finite

    model = GPT(ModelConfig(d_model=32, n_layers=1, n_heads=4, vocab_size=64, seq_len=16))
    assert weights_finite(model)
    with torch.no_grad():
        next(model.parameters()).view(-1)[3] = float("nan")
    assert not weights_finite(model)
