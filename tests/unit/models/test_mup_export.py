"""HF export of a mup model (models/hf_export.py): the attention scale and the logit multiplier are
folded into q_proj and lm_head, so transformers' plain Llama/Mixtral gives our logits; a tied
model is exported untied; the model in memory is left as it was."""

from __future__ import annotations

import warnings

import pytest
import torch

from models.hf_export import export_model
from tests.helpers import tiny_model, tiny_model_config, tiny_tokenizer
from tests.unit.evals.test_export_hf import _parity


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize(
    "moe,arch", [(None, "LlamaForCausalLM"), (dict(num_experts=4, top_k=2, renormalize=True), "MixtralForCausalLM")]
)
def test_exported_mup_model_gives_our_logits(tmp_path, tok, tie, moe, arch):
    cfg = tiny_model_config(
        tok.get_vocab_size(), d_model=64, tie_embeddings=tie, moe=moe, parametrization="mup", mup_base_width=16
    )
    model = tiny_model(cfg)  # width ratio 4: logits x 1/4, attention 2/16 instead of 1/4
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_model(model, cfg, tok, 0, tmp_path)
        hf = _parity(model, tmp_path, arch)
    assert hf.config.tie_word_embeddings is False  # a tied mup model's head carries the multiplier
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_tied_mup_at_the_base_width_stays_tied(tmp_path, tok):
    cfg = tiny_model_config(tok.get_vocab_size(), tie_embeddings=True, parametrization="mup", mup_base_width=32)
    model = tiny_model(cfg)
    export_model(model, cfg, tok, 0, tmp_path)
    assert _parity(model, tmp_path, "LlamaForCausalLM").config.tie_word_embeddings is True
