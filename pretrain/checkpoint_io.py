"""Load a trained GPT, its config and tokenizer from a run directory, outside DeepSpeed.

Evaluation, export and notebooks need the weights without an engine or a process group.
A path may be a run directory (its newest complete checkpoint is used) or a
`checkpoints/step_N` directory. ZeRO 0-2 checkpoints hold the full module state dict in
`mp_rank_00_model_states.pt`; ZeRO-3 shards are merged with DeepSpeed's `zero_to_fp32`;
expert-parallel MoE checkpoints keep their experts in DeepSpeed's per-expert files, which are
restacked into the model's (E, ...) expert tensors (`restack_experts`: both layouts below).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from pretrain.checkpoint import MARKER, complete_checkpoints

EOT_TOKEN = "<|endoftext|>"
DS_EXPERT = re.compile(r"^(?P<prefix>.*?)(?P<sharded>experts\.)?deepspeed_moe\.experts\.deepspeed_experts\.(?P<idx>\d+)\.(?P<name>\w+)$")


class CheckpointError(RuntimeError):
    """A run directory or checkpoint that cannot be loaded; the message says why and what to do."""


@dataclass
class LoadedRun:
    model: torch.nn.Module
    config: object  # pretrain.config.schema.TrainConfig
    tokenizer: object  # tokenizers.Tokenizer
    eot_id: int
    run_dir: Path
    checkpoint: Path
    step: int
    meta: dict = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return self.step * self.config.tokens_per_step()


def resolve_checkpoint(path: str | Path) -> tuple[Path, Path, int]:
    """(run_dir, checkpoint_dir, step) for a run directory or a `checkpoints/step_N` directory."""
    p = Path(path).resolve()
    if not p.exists():
        raise CheckpointError(f"{path}: no such run directory or checkpoint")
    if p.name.startswith("step_") and p.parent.name == "checkpoints":
        if not (p / MARKER).exists():
            raise CheckpointError(f"{p}: checkpoint is incomplete (no {MARKER} file); use an older one")
        try:
            step = int(p.name[5:])
        except ValueError:
            raise CheckpointError(f"{p}: not a checkpoint directory (expected step_<N>)") from None
        return p.parent.parent, p, step
    if (p / "config.yaml").exists():
        done = complete_checkpoints(p / "checkpoints")
        if not done:
            raise CheckpointError(f"{p}: run directory has no complete checkpoint under checkpoints/")
        step, ckpt = done[-1]
        return p, ckpt, step
    raise CheckpointError(f"{path}: neither a run directory (config.yaml) nor a checkpoints/step_N directory")


def load_config(run_dir: Path):
    from pretrain.config.schema import TrainConfig

    try:
        return TrainConfig.model_validate(yaml.safe_load((run_dir / "config.yaml").read_text()))
    except FileNotFoundError:
        raise CheckpointError(f"{run_dir}: config.yaml missing; is this a scalelab run directory?") from None


def load_tokenizer(run_dir: Path, model_vocab: int | None = None):
    """The run's HF `tokenizers` tokenizer, its EOT id and metadata, checked against the model."""
    from tokenizers import Tokenizer

    tok_path = run_dir / "tokenizer.json"
    if not tok_path.exists():
        raise CheckpointError(f"{run_dir}: tokenizer.json missing; the run directory is not self-contained")
    tok = Tokenizer.from_file(str(tok_path))
    meta_path = run_dir / "tokenizer_meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    eot = tok.token_to_id(EOT_TOKEN)
    if eot is None:
        raise CheckpointError(f"{tok_path}: tokenizer has no {EOT_TOKEN} token")
    check_tokenizer(tok.get_vocab_size(), eot, meta, model_vocab, str(tok_path))
    return tok, eot, meta


def check_tokenizer(tok_vocab: int, eot: int, meta: dict, model_vocab: int | None, where: str) -> None:
    """Refuse a tokenizer that does not belong to the model (wrong sizes or EOT id)."""
    if meta.get("vocab_size") is not None and meta["vocab_size"] != tok_vocab:
        raise CheckpointError(
            f"tokenizer mismatch: {where} has {tok_vocab} tokens but tokenizer_meta.json says {meta['vocab_size']}"
        )
    if meta.get("eot_id") is not None and meta["eot_id"] != eot:
        raise CheckpointError(f"tokenizer mismatch: {where} maps {EOT_TOKEN} to {eot}, tokenizer_meta.json to {meta['eot_id']}")
    if model_vocab is not None and tok_vocab > model_vocab:
        raise CheckpointError(
            f"tokenizer mismatch: {where} has {tok_vocab} tokens but the model's vocabulary is {model_vocab}"
        )


def _torch_load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)


def read_state_dict(ckpt: Path) -> dict[str, torch.Tensor]:
    """Full fp32-or-native state dict of a DeepSpeed checkpoint directory."""
    main = ckpt / "mp_rank_00_model_states.pt"
    zero3 = sorted(ckpt.glob("zero_pp_rank_*_mp_rank_00_model_states.pt"))
    sd: dict | None = None
    if main.exists():
        sd = _torch_load(main).get("module")
    elif zero3:
        sd = _torch_load(zero3[0]).get("module")
    if not sd or _is_zero3_placeholder(sd):
        if not sorted(ckpt.glob("*optim_states.pt")):
            raise CheckpointError(f"{ckpt}: no model states found (expected mp_rank_00_model_states.pt)")
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

        sd = dict(get_fp32_state_dict_from_zero_checkpoint(str(ckpt.parent), tag=ckpt.name))
    for f in sorted(ckpt.glob("layer_*_expert_*_mp_rank_00_model_states.pt")):  # expert-parallel MoE
        sd.update(_torch_load(f))
    return restack_experts(sd)


def _is_zero3_placeholder(sd: dict) -> bool:
    """ZeRO-3 saves empty (numel 0) placeholders in the module state dict."""
    tensors = [v for v in sd.values() if torch.is_tensor(v)]
    return bool(tensors) and all(v.numel() == 0 for v in tensors)


def restack_experts(sd: dict) -> dict:
    """DeepSpeed expert keys -> the model's `<block>.experts.<w>` tensors of shape (E, ...).

    Two layouts (`pretrain.expert_parallel`):
    - `<block>.experts.deepspeed_moe.experts.deepspeed_experts.<r>.<w>`, shape (E/ep, ...): EP rank
      r's block of experts, concatenated in rank order (current);
    - `<block>.deepspeed_moe.experts.deepspeed_experts.<e>.<w>`, shape (...): one global expert e,
      stacked in expert order (checkpoints written before the experts moved into their own module).
    """
    groups: dict[tuple[str, str, bool], dict[int, torch.Tensor]] = {}
    out = {}
    for k, v in sd.items():
        m = DS_EXPERT.match(k)
        if m:
            groups.setdefault((m["prefix"], m["name"], bool(m["sharded"])), {})[int(m["idx"])] = v
        else:
            out[k] = v
    for (prefix, name, sharded), per in groups.items():
        parts = [per[i] for i in sorted(per)]
        out[f"{prefix}experts.{name}"] = torch.cat(parts) if sharded else torch.stack(parts)
    return out


def load_run(path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> LoadedRun:
    """Build the GPT of a run (or checkpoint) and load its weights, in eval mode."""
    from models.gpt import GPT

    run_dir, ckpt, step = resolve_checkpoint(path)
    cfg = load_config(run_dir)
    tok, eot, meta = load_tokenizer(run_dir, cfg.model.vocab_size)
    sd = read_state_dict(ckpt)
    sd = {k.removeprefix("_orig_mod.").removeprefix("module."): v for k, v in sd.items()}
    model = GPT(cfg.model)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not (cfg.model.tie_embeddings and k == "lm_head.weight")]
    if missing or unexpected:
        raise CheckpointError(
            f"{ckpt}: weights do not match the run's config.yaml (missing {missing[:5]}, unexpected {unexpected[:5]})"
        )
    model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    return LoadedRun(model=model, config=cfg, tokenizer=tok, eot_id=eot, run_dir=run_dir, checkpoint=ckpt, step=step, meta=meta)
