"""Load a trained GPT, its model config and tokenizer from a run directory, outside DeepSpeed.

Evaluation, export and notebooks need the weights without an engine or a process group.
A path may be a run directory (its newest complete checkpoint is used) or a
`checkpoints/step_N` directory. ZeRO 0-2 checkpoints hold the full module state dict in
`mp_rank_00_model_states.pt`; ZeRO-3 shards are merged with DeepSpeed's `zero_to_fp32`;
expert-parallel MoE checkpoints keep their experts in DeepSpeed's per-expert files, which are
restacked into the model's (E, ...) expert tensors (`restack_experts`: both layouts below).

The one module of `rundir` that imports torch: torch-free readers (the dashboard, scaling) never
import it, which `lint-imports` checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from rundir.checkpoints import CheckpointError, resolve_checkpoint
from rundir.config import run_model
from rundir.tokenizer import load_tokenizer

DS_EXPERT = re.compile(
    r"^(?P<prefix>.*?)(?P<sharded>experts\.)?deepspeed_moe\.experts\.deepspeed_experts\.(?P<idx>\d+)\.(?P<name>\w+)$"
)


@dataclass
class LoadedRun:
    model: torch.nn.Module
    model_config: object  # models.config.ModelConfig
    tokenizer: object  # tokenizers.Tokenizer
    eot_id: int
    run_dir: Path
    checkpoint: Path
    step: int
    tokens_per_step: int | None = None
    meta: dict = field(default_factory=dict)

    @property
    def tokens(self) -> int | None:
        return None if self.tokens_per_step is None else self.step * self.tokens_per_step


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
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint  # deferred: imports deepspeed

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

    Two layouts (`pretrain.engine.expert_parallel`):
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
    """Build the GPT of a run (or checkpoint) from its model config and load its weights, in eval mode."""
    from models.gpt import GPT  # deferred: imports torch

    run_dir, ckpt, step = resolve_checkpoint(path)
    rm = run_model(run_dir)
    cfg = rm.model
    tok, eot, meta = load_tokenizer(run_dir, cfg.vocab_size)
    sd = read_state_dict(ckpt)
    sd = {k.removeprefix("_orig_mod.").removeprefix("module."): v for k, v in sd.items()}
    model = GPT(cfg)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not (cfg.tie_embeddings and k == "lm_head.weight")]
    if missing or unexpected:
        raise CheckpointError(
            f"{ckpt}: weights do not match the run's config.yaml (missing {missing[:5]}, unexpected {unexpected[:5]})"
        )
    model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    return LoadedRun(
        model=model,
        model_config=cfg,
        tokenizer=tok,
        eot_id=eot,
        run_dir=run_dir,
        checkpoint=ckpt,
        step=step,
        tokens_per_step=rm.tokens_per_step,
        meta=meta,
    )
