"""Decoder-only GPT (Llama layout). Knows nothing of DeepSpeed or the trainer.

`forward` returns a `ModelOutput`: cross-entropy `loss` when targets are given, an `aux_loss`
(router losses of MoE layers, returned through the forward pass rather than globals) and
per-layer `router_stats` for logging.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from models.checkpointing import blocks_to_checkpoint, checkpointed
from models.config import ModelConfig
from models.layers import Attention, RMSNorm, SwiGLU, init_weights, rope_tables
from models.mup import is_mup, logit_scale


class ModelOutput(NamedTuple):
    """A named tuple, not a dataclass: wrappers such as DeepSpeed's engine find the output tensors
    only inside tuples, lists and dicts, and attach their pre-backward work to them (clearing
    bf16 gradients between micro-batches, ZeRO-3 re-gathers)."""

    logits: torch.Tensor | None
    loss: torch.Tensor | None = None
    aux_loss: torch.Tensor | None = None
    router_stats: list[dict] = []  # never mutated: forward builds a new list


def build_ffn(cfg: ModelConfig, layer_idx: int) -> nn.Module:
    moe = getattr(cfg, "moe", None)
    if moe is not None:
        from models.moe.block import build_moe_ffn  # MoE issue

        ffn = build_moe_ffn(cfg, layer_idx)
        if ffn is not None:
            return ffn
    return SwiGLU(cfg.d_model, cfg.ffn_dim)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = build_ffn(cfg, layer_idx)
        self.routes_by_token = getattr(self.mlp, "routes_by_token", False)  # token_hash: the MoE layer takes the ids

    def forward(self, x, cos, sin, kv_cache=None, token_ids=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, kv_cache)
        h = self.post_attention_layernorm(x)
        h, aux = self.mlp(h, token_ids) if self.routes_by_token else self.mlp(h)  # aux: MoE losses/stats, or None
        return x + h, aux


class Backbone(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        assert cfg.vocab_size is not None, "GPT checks that the vocabulary size is resolved"
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)


class GPT(nn.Module):
    rope_cos: torch.Tensor  # buffers (register_buffer): the rotary tables for the training context
    rope_sin: torch.Tensor

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.vocab_size is None:
            raise ValueError("model.vocab_size must be resolved before building the model")
        if cfg.priced_only():  # an architecture priced by the planner, never silently built as Llama attention
            raise ValueError(f"{' and '.join(cfg.priced_only())}: not built by this model (priced only)")
        self.cfg = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        init_weights(self, cfg)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        cos, sin = rope_tables(cfg.head_dim, cfg.seq_len, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.checkpoint_layers: frozenset[int] = frozenset()  # blocks whose activations are recomputed in backward
        self.logit_scale = logit_scale(cfg) if is_mup(cfg) else None  # mup: logits x base_width/d_model

    def set_activation_checkpointing(self, every: int) -> None:
        """Recompute every `every`-th block's activations in backward (0: none, 1: every block);
        applies to training forwards with gradients only (models.checkpointing)."""
        self.checkpoint_layers = blocks_to_checkpoint(self.cfg.n_layers, every)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """Logits of final-norm hidden states: the LM head, times mup's logit multiplier (also for
        callers that run the backbone themselves: evals/forward.py)."""
        out = self.lm_head(h)
        return out if self.logit_scale is None else out * self.logit_scale

    def _rope(self, start: int, length: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        end = start + length
        if end > self.rope_cos.shape[0]:  # longer than training context (eval/generation)
            cos, sin = rope_tables(self.cfg.head_dim, end, self.cfg.rope_theta, device=device)
            return cos[start:end], sin[start:end]
        return self.rope_cos[start:end], self.rope_sin[start:end]

    def forward(
        self,
        input_ids: torch.Tensor,
        targets: torch.Tensor | None = None,
        kv_caches: list | None = None,
        logits: bool = True,
    ) -> ModelOutput:
        start = kv_caches[0].length if kv_caches else 0
        cos, sin = self._rope(start, input_ids.shape[1], input_ids.device)
        cos, sin = cos.to(self.model.embed_tokens.weight.dtype), sin.to(self.model.embed_tokens.weight.dtype)
        x = self.model.embed_tokens(input_ids)
        aux_losses, stats = [], []
        recompute = self.checkpoint_layers if self.training and torch.is_grad_enabled() and not kv_caches else ()
        for i, layer in enumerate(self.model.layers):
            if i in recompute:
                x, aux = checkpointed(layer, x, cos, sin, None, input_ids)
            else:
                x, aux = layer(x, cos, sin, kv_caches[i] if kv_caches else None, input_ids)
            if aux is not None:
                aux_losses.append(aux.loss)
                stats.append(aux.stats | {"layer": i})
        out = self.head(self.model.norm(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(out.float().view(-1, out.shape[-1]), targets.reshape(-1), ignore_index=-100)
        aux_loss = torch.stack(aux_losses).sum() if aux_losses else None
        return ModelOutput(logits=out if logits else None, loss=loss, aux_loss=aux_loss, router_stats=stats)


class KVCache:
    """Per-layer key/value cache for incremental decoding (generation in evaluation)."""

    def __init__(self):
        self.k = self.v = None

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def update(self, k: torch.Tensor, v: torch.Tensor):
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        return self.k, self.v
