"""`scalelab export hf`: transformers directory loadable offline, logits equal ours (dense, MoE)."""

from __future__ import annotations

import warnings

import pytest
import torch

from models.hf_export import ExportError, export_model
from tests.helpers import tiny_model, tiny_model_config, tiny_tokenizer, write_run_dir


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def _parity(model, out_dir, arch: str, tol: float = 1e-4):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32, local_files_only=True).eval()
    assert type(hf).__name__ == arch
    ids = torch.randint(0, model.cfg.vocab_size, (3, model.cfg.seq_len))
    with torch.no_grad():
        diff = (hf(ids).logits - model(ids).logits).abs().max().item()
    assert diff < tol, diff
    return hf


def test_tied_embeddings(tmp_path, tok):
    model = tiny_model(tiny_model_config(tok.get_vocab_size(), tie_embeddings=True, n_kv_heads=None))
    export_model(model, model.cfg, tok, 0, tmp_path)
    hf = _parity(model, tmp_path, "LlamaForCausalLM")
    assert hf.config.tie_word_embeddings is True


@pytest.mark.parametrize(
    "moe,arch",
    [
        (dict(num_experts=4, top_k=2, renormalize=True), "MixtralForCausalLM"),
        (dict(num_experts=4, top_k=2), "Qwen2MoeForCausalLM"),  # un-normalised top-k weights
        (dict(num_experts=4, top_k=1, first_dense_layers=1, d_ff=48), "Qwen2MoeForCausalLM"),  # dense prefix
        # sinkhorn balances only in training; at inference it is softmax top-k, so it exports as such
        (dict(num_experts=4, top_k=2, router="sinkhorn", renormalize=True), "MixtralForCausalLM"),
        (dict(num_experts=4, top_k=2, router="sinkhorn"), "Qwen2MoeForCausalLM"),
    ],
)
def test_moe_parity(tmp_path, tok, moe, arch):
    model = tiny_model(tiny_model_config(tok.get_vocab_size(), n_layers=3, moe=moe))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_model(model, model.cfg, tok, 0, tmp_path)
        _parity(model, tmp_path, arch)


@pytest.mark.parametrize(
    "moe,match",
    [
        (dict(router="expert_choice"), "expert_choice.*no standard transformers equivalent"),
        (dict(router="aux_free_bias"), "aux_free_bias"),
        (dict(router="softmax_topk", num_shared_experts=1), "num_shared_experts"),
    ],
)
def test_unsupported_moe_is_refused(tmp_path, tok, moe, match):
    model = tiny_model(tiny_model_config(tok.get_vocab_size(), moe=moe))
    with pytest.raises(ExportError, match=match):
        export_model(model, model.cfg, tok, 0, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_moe_checkpoint_with_deepspeed_expert_files(tmp_path, tok):
    """Expert-parallel checkpoints keep one file per expert; the loader restacks them."""
    from rundir.weights import load_run

    model = tiny_model(tiny_model_config(tok.get_vocab_size(), moe=dict(num_experts=2, top_k=1, renormalize=True)))
    rd = write_run_dir(tmp_path / "run", model, tok, step=3)
    ck = rd / "checkpoints" / "step_3"
    sd = model.state_dict()
    main, experts = {}, {}
    for k, v in sd.items():
        if ".mlp.experts." in k:
            prefix, name = k.rsplit(".experts.", 1)
            for e in range(v.shape[0]):
                experts.setdefault(e, {})[f"{prefix}.deepspeed_moe.experts.deepspeed_experts.{e}.{name}"] = v[e].clone()
        else:
            main[k] = v
    torch.save({"module": main}, ck / "mp_rank_00_model_states.pt")
    for e, part in experts.items():
        torch.save(part, ck / f"layer_0_expert_{e}_mp_rank_00_model_states.pt")
    loaded = load_run(rd)
    ids = torch.randint(0, 300, (1, 9))
    with torch.no_grad():
        assert torch.equal(loaded.model(ids).logits, model(ids).logits)
