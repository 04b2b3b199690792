"""Tiny models and tokenizers, and a run directory that holds one as a trainer's checkpoint (for
evaluation and export tests that need no DeepSpeed and no training)."""

from __future__ import annotations

import json
from pathlib import Path

from rundir.layout import RunDir
from tests.helpers.runs import write_run

REPO = Path(__file__).resolve().parents[2]


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
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([text or SAMPLE_TEXT * 4], trainer=trainer)
    return tok


def tiny_model_config(vocab_size: int, seq_len: int = 32, moe: dict | None = None, **kw):
    from models.config import ModelConfig

    base = dict(
        d_model=32,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        vocab_size=vocab_size,
        seq_len=seq_len,
        rope_theta=500.0,
        norm_eps=1e-5,
        init_std=0.2,
    )
    base.update(kw)
    if moe is not None:
        base["moe"] = moe
    return ModelConfig(**base)


def tiny_model(cfg, seed: int = 0):
    """A randomly initialised GPT with non-trivial norms (so parity tests compare real numbers)."""
    import torch

    from models.gpt import GPT

    torch.manual_seed(seed)
    model = GPT(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    return model.eval()


def write_run_dir(path: Path, model, tokenizer, step: int = 10, wandb_mode: str = "disabled") -> Path:
    """A self-contained run directory holding `model` as a ZeRO-0 checkpoint at `checkpoints/step_<step>`
    (config.yaml, tokenizer files, COMPLETE marker, `latest`), so evaluation and export can be
    tested without DeepSpeed or training."""
    import torch

    from pretrain.config.loader import load_train_config
    from pretrain.config.schema import TrainConfig

    base = load_train_config(REPO / "configs/train/tiny.yaml", ["train.tokens=1000"])
    data = base.model_dump(mode="json")
    data["model"] = model.cfg.model_dump(mode="json")
    data["wandb"]["mode"] = wandb_mode
    data["train"]["micro_batch_size"] = data["train"]["global_batch_size"] = 2
    rd = RunDir(write_run(path, config=TrainConfig.model_validate(data).model_dump(mode="json"), checkpoint=step))
    tokenizer.save(str(rd.tokenizer))
    meta = {"vocab_size": tokenizer.get_vocab_size(), "eot_id": tokenizer.token_to_id(EOT)}
    rd.tokenizer_meta.write_text(json.dumps(meta))
    torch.save({"module": model.state_dict()}, rd.checkpoint(step) / "mp_rank_00_model_states.pt")
    return rd.path
