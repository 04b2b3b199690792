"""`scalelab export hf`: transformers directory loadable offline, logits equal ours (dense, MoE)."""

from __future__ import annotations

import json

from tests.helpers import tiny_model, tiny_model_config, write_run_dir
from tests.unit.evals.test_export_hf import _parity, tok  # noqa: F401 (shared with the unit tests)


def test_dense_round_trip_via_cli(tmp_path, tok):
    from transformers import AutoConfig, AutoTokenizer

    from launch.cli import main

    cfg = tiny_model_config(tok.get_vocab_size(), rope_theta=12345.0, norm_eps=1e-6)
    model = tiny_model(cfg)
    rd = write_run_dir(tmp_path / "run", model, tok, step=5)
    out = tmp_path / "hf"
    assert main(["export", "hf", str(rd / "checkpoints" / "step_5"), str(out)]) == 0
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
    c = AutoConfig.from_pretrained(out, local_files_only=True)
    assert (c.rope_parameters["rope_theta"], c.rms_norm_eps, c.num_key_value_heads, c.head_dim) == (12345.0, 1e-6, 2, 8)
    assert c.tie_word_embeddings is False and c.max_position_embeddings == cfg.seq_len
    _parity(model, out, "LlamaForCausalLM")
    t = AutoTokenizer.from_pretrained(out, local_files_only=True)
    text = "Who should Derek hug after shocking Richard?"
    assert t.encode(text) == tok.encode(text, add_special_tokens=False).ids  # no BOS added
    assert t.bos_token == t.eos_token == "<|endoftext|>" and t.bos_token_id == 0
    assert t.decode(t.encode(text)) == text
    assert json.loads((out / "scalelab_export.json").read_text())["step"] == 5
