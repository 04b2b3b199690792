"""Tiny models, tokenizers and run directories built in a second, for tests and examples.

A run directory written here has the same layout as a trained one (config.yaml, tokenizer files,
a ZeRO-0 style `checkpoints/step_N/mp_rank_00_model_states.pt` with a COMPLETE marker), so
evaluation and export can be tested without DeepSpeed or training.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

EOT = "<|endoftext|>"
SAMPLE_TEXT = (
    "The cat sat on the mat. The dogs sit on the mats. A bird sings in the tree while the children play.\n"
    "Who should Derek hug after shocking Richard? These men were walking to the store. That woman has eaten.\n"
    "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak.\n"
)


def tiny_tokenizer(vocab_size: int = 300, text: str | None = None):
    """Byte-level BPE with `<|endoftext|>` as id 0, built like the data pipeline's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([text or SAMPLE_TEXT * 4], trainer=trainer)
    return tok


def tiny_model_config(vocab_size: int, seq_len: int = 32, moe: dict | None = None, **kw):
    from models.config import ModelConfig

    base = dict(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=vocab_size, seq_len=seq_len,
                rope_theta=500.0, norm_eps=1e-5, init_std=0.2)
    base.update(kw)
    if moe is not None:
        base["moe"] = moe
    return ModelConfig(**base)


def tiny_model(cfg, seed: int = 0):
    """A randomly initialised GPT with non-trivial norms (so parity tests compare real numbers)."""
    from models.gpt import GPT

    torch.manual_seed(seed)
    model = GPT(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    return model.eval()


def write_run_dir(path: Path, model, tokenizer, step: int = 10, wandb_mode: str = "disabled",
                  seq_len: int | None = None) -> Path:
    """A self-contained fake run directory holding `model` at `checkpoints/step_<step>`."""
    from pretrain.config.loader import load_train_config
    from pretrain.config.schema import TrainConfig

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    base = load_train_config(Path(__file__).resolve().parents[1] / "configs/train/tiny.yaml", ["train.tokens=1000"])
    data = base.model_dump(mode="json")
    data["model"] = model.cfg.model_dump(mode="json")
    data["wandb"]["mode"] = wandb_mode
    data["train"]["micro_batch_size"] = data["train"]["global_batch_size"] = 2
    cfg = TrainConfig.model_validate(data)
    import yaml

    (path / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    tokenizer.save(str(path / "tokenizer.json"))
    eot = tokenizer.token_to_id(EOT)
    (path / "tokenizer_meta.json").write_text(json.dumps({"vocab_size": tokenizer.get_vocab_size(), "eot_id": eot}))
    ck = path / "checkpoints" / f"step_{step}"
    ck.mkdir(parents=True, exist_ok=True)
    torch.save({"module": model.state_dict()}, ck / "mp_rank_00_model_states.pt")
    (ck / "COMPLETE").write_text(json.dumps({"step": step}) + "\n")
    (path / "checkpoints" / "latest").write_text(f"step_{step}\n")
    return path
