"""Export a scalelab checkpoint as a Hugging Face `transformers` model directory.

Dense models become `LlamaForCausalLM` (our parameter names are Llama's, so the weights copy
1:1). Token-choice softmax top-k MoE becomes `MixtralForCausalLM` when it is Mixtral exactly
(top-k weights renormalised, every layer MoE, no shared experts) and `Qwen2MoeForCausalLM`
otherwise (un-normalised top-k weights, dense prefix layers / every k-th layer MoE). `sinkhorn`
exports the same way: it balances the selection only in training, and routes by plain softmax
top-k at inference, which is what the exported model computes. Routers without a standard
transformers equivalent (aux_free_bias, expert_choice) and shared experts (Qwen2-MoE gates its
shared expert, ours is ungated) are refused with a clear message.

The model is built in `transformers` from the config, our tensors are loaded with strict key
checking, and `save_pretrained` writes safetensors in whatever on-disk layout the installed
transformers version uses, so the directory loads offline with `AutoModelForCausalLM`.
This module takes a model in memory; reading it from a run directory is the caller's
(`evals.export.export_checkpoint`, behind `scalelab export hf`).

A mup model (models/mup.py) exports as an ordinary one: its attention scale is folded into q_proj
(Llama scales scores by 1/sqrt(head_dim)) and its logit multiplier into lm_head. A tied model's
multiplier cannot be folded into the shared matrix without changing the embedding, so a tied mup
model is exported untied (tie_word_embeddings false, lm_head = multiplier x embedding).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

from base.errors import UserError
from models.mup import attention_scale, is_mup, logit_scale

EOT_TOKEN = "<|endoftext|>"


# Routers whose inference routing is top-k over softmax probabilities, weights = those probabilities
# (renormalised iff model.moe.renormalize): sinkhorn's balancing applies in training only.
INFERENCE_SOFTMAX_TOPK = ("softmax_topk", "sinkhorn")


class ExportError(UserError, ValueError):
    """The checkpoint cannot be expressed as a standard transformers model."""


def _common(cfg, eot_id: int) -> dict:
    return dict(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.kv_heads,
        head_dim=cfg.head_dim,
        max_position_embeddings=cfg.seq_len,
        rms_norm_eps=cfg.norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": float(cfg.rope_theta)},
        tie_word_embeddings=cfg.tie_embeddings,
        hidden_act="silu",
        attention_dropout=0.0,
        bos_token_id=eot_id,
        eos_token_id=eot_id,
        pad_token_id=eot_id,
        initializer_range=cfg.init_std,
    )


def moe_target(cfg) -> str:
    """'mixtral' or 'qwen2_moe' for an exportable MoE config; raises ExportError otherwise."""
    moe = cfg.moe
    if moe.router not in INFERENCE_SOFTMAX_TOPK:
        raise ExportError(
            f"model.moe.router={moe.router!r} has no standard transformers equivalent; only "
            f"{' and '.join(INFERENCE_SOFTMAX_TOPK)} (Mixtral / Qwen2-MoE routing at inference) can be exported. "
            "Evaluate it with `scalelab eval` instead."
        )
    if moe.num_shared_experts:
        raise ExportError(
            "model.moe.num_shared_experts > 0 cannot be exported: Qwen2-MoE/DeepSeek gate or route shared experts "
            "differently from scalelab's ungated shared SwiGLU"
        )
    if moe.capacity_factor is not None:
        warnings.warn(
            "transformers MoE models are dropless: outputs equal ours only when no token exceeds capacity "
            f"(model.moe.capacity_factor={moe.capacity_factor})",
            stacklevel=3,
        )
    all_moe = moe.moe_layers(cfg.n_layers) == list(range(cfg.n_layers))
    return "mixtral" if (moe.renormalize and all_moe) else "qwen2_moe"


def hf_config(cfg, eot_id: int):
    """transformers config object for a scalelab `ModelConfig`."""
    if cfg.moe is None:
        from transformers import LlamaConfig  # deferred: imports transformers

        return LlamaConfig(**_common(cfg, eot_id), intermediate_size=cfg.ffn_dim, attention_bias=False, mlp_bias=False)
    moe = cfg.moe
    d_ff = moe.d_ff or cfg.ffn_dim
    if moe_target(cfg) == "mixtral":
        from transformers import MixtralConfig  # deferred: imports transformers

        return MixtralConfig(
            **_common(cfg, eot_id),
            intermediate_size=d_ff,
            num_local_experts=moe.num_experts,
            num_experts_per_tok=moe.top_k,
            sliding_window=None,
            router_jitter_noise=0.0,
            output_router_logits=False,
            router_aux_loss_coef=moe.aux_loss_coef,
        )
    from transformers import Qwen2MoeConfig  # deferred: imports transformers

    moe_layers = set(moe.moe_layers(cfg.n_layers))
    return Qwen2MoeConfig(
        **_common(cfg, eot_id),
        intermediate_size=cfg.ffn_dim,
        moe_intermediate_size=d_ff,
        num_experts=moe.num_experts,
        num_experts_per_tok=moe.top_k,
        norm_topk_prob=bool(moe.renormalize),
        shared_expert_intermediate_size=0,
        decoder_sparse_step=1,
        mlp_only_layers=[i for i in range(cfg.n_layers) if i not in moe_layers],
        qkv_bias=False,
        use_sliding_window=False,
        sliding_window=None,
        output_router_logits=False,
        router_aux_loss_coef=moe.aux_loss_coef,
    )


def convert_state_dict(sd: dict[str, torch.Tensor], cfg, target_model) -> dict[str, torch.Tensor]:
    """Our tensors under the target model's parameter names (experts restacked as it needs)."""
    target = target_model.state_dict()
    out = {}
    for k, v in sd.items():
        if k in ("rope_cos", "rope_sin") or (cfg.tie_embeddings and k == "lm_head.weight"):
            continue
        if ".mlp.router.weight" in k:
            out[k.replace(".mlp.router.weight", ".mlp.gate.weight")] = v
        elif ".mlp.experts." in k:
            prefix, name = k.rsplit(".", 1)
            if f"{prefix}.gate_up_proj" in target:  # fused (E, 2*d_ff, d) layout: gate first, then up
                if name == "gate_proj":
                    out[f"{prefix}.gate_up_proj"] = torch.cat([v, sd[f"{prefix}.up_proj"]], dim=1)
                elif name == "down_proj":
                    out[k] = v
            elif f"{prefix}.0.gate_proj.weight" in target:  # per-expert Linear layout
                for e in range(v.shape[0]):
                    out[f"{prefix}.{e}.{name}.weight"] = v[e]
            else:
                out[k] = v
        else:
            out[k] = v
    return out


def fold_mup(sd: dict[str, torch.Tensor], cfg):
    """(state dict, config) of the ordinary (sp) model computing what the mup model `cfg` computes.

    New tensors are made (never in place: `sd` may share storage with the live model)."""
    if not is_mup(cfg):
        return sd, cfg
    sd = dict(sd)
    q_mult = attention_scale(cfg) * cfg.head_dim**0.5  # ours / Llama's 1/sqrt(head_dim)
    for k in sd:
        if k.endswith("self_attn.q_proj.weight"):
            sd[k] = sd[k] * q_mult
    out_mult = logit_scale(cfg)
    untie = cfg.tie_embeddings and out_mult != 1.0
    head = sd["model.embed_tokens.weight"] if cfg.tie_embeddings else sd["lm_head.weight"]
    sd["lm_head.weight"] = head * out_mult
    plain = cfg.model_copy(update={"parametrization": "sp", "tie_embeddings": cfg.tie_embeddings and not untie})
    return sd, plain


def export_model(model, cfg, tokenizer, eot_id: int, out_dir: str | Path) -> Path:
    """Write config, safetensors weights and tokenizer files for an in-memory GPT."""
    from transformers import AutoModelForCausalLM  # deferred: imports transformers

    out = Path(out_dir)
    sd, cfg = fold_mup({k: v.detach().float().cpu() for k, v in model.state_dict().items()}, cfg)
    hcfg = hf_config(cfg, eot_id)
    hf = AutoModelForCausalLM.from_config(hcfg, dtype=torch.float32)
    sd = convert_state_dict(sd, cfg, hf)
    hf_sd = hf.state_dict()
    expected = {k for k in hf_sd if not (cfg.tie_embeddings and k == "lm_head.weight")}
    # Qwen2-MoE's (empty) shared expert has no counterpart in our model.
    extra_ok = {k for k in expected if ".shared_expert" in k}
    missing, unexpected = sorted(expected - set(sd) - extra_ok), sorted(set(sd) - set(hf_sd))
    if missing or unexpected:
        raise ExportError(f"weight mapping incomplete: missing {missing[:6]}, unexpected {unexpected[:6]}")
    for k in extra_ok:
        sd[k] = torch.zeros_like(hf_sd[k])
    for k, v in sd.items():
        if hf_sd[k].shape != v.shape:
            raise ExportError(f"{k}: shape {tuple(v.shape)} does not match transformers' {tuple(hf_sd[k].shape)}")
    hf.load_state_dict(sd, strict=False)
    if cfg.tie_embeddings:
        hf.tie_weights()
    hf.eval()
    out.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(out, safe_serialization=True)
    export_tokenizer(tokenizer, cfg.seq_len, out)
    return out


def export_tokenizer(tokenizer, seq_len: int, out_dir: Path):
    """`PreTrainedTokenizerFast` over our byte-level BPE; bos = eos = pad = `<|endoftext|>`, no
    tokens added by `encode` (so lm-eval's `hf` model tokenises exactly like our adapter)."""
    from transformers import PreTrainedTokenizerFast  # deferred: imports transformers

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=EOT_TOKEN,
        eos_token=EOT_TOKEN,
        pad_token=EOT_TOKEN,
        unk_token=None,
        model_max_length=seq_len,
        clean_up_tokenization_spaces=False,
    )
    fast.save_pretrained(out_dir)
    return fast
