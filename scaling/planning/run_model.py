"""The planned run's model: the configs/models/ presets with their parameter counts and per-token
costs (torch-free, models.accounting), the vocabulary they are counted with, and how a run's model
is named and described (a preset, or a shape designed by a models.design rule)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from models.accounting import model_counts
from models.config import ModelConfig

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # scaling/<subpackage>/<module>.py


PRESET_KEY = {"total": "total", "non_embedding": "non_embedding", "active": "active"}


def configs_dir() -> Path:
    return Path(os.environ.get("SCALELAB_CONFIGS", PROJECT_ROOT / "configs"))


def default_vocab_size() -> int | None:
    """tokenizer.vocab_size of configs/data/default.yaml (the data the emitted config trains on)."""
    p = configs_dir() / "data" / "default.yaml"
    if not p.exists():
        return None
    data = yaml.safe_load(p.read_text()) or {}
    return (data.get("tokenizer") or {}).get("vocab_size")


def model_presets(vocab_size: int, seq_len: int | None = None) -> list[dict]:
    """Every configs/models/*.yaml preset with its parameter counts and per-token costs in each
    compute convention (pure Python, no torch). `seq_len` overrides the presets' context length
    (attention FLOPs depend on it)."""
    out = []
    for p in sorted((configs_dir() / "models").glob("*.yaml")):
        try:
            raw = yaml.safe_load(p.read_text()) or {}
            if seq_len:
                raw["seq_len"] = seq_len
            cfg = ModelConfig(**raw)
            c = model_counts(cfg, vocab_size)
        except Exception:  # a broken preset is skipped, not fatal for planning
            continue
        out.append(
            {
                "name": p.stem,
                "moe": cfg.moe is not None,
                "model": {"preset": p.stem},
                "total": c.total,
                "non_embedding": c.non_embedding,
                "active": c.active,
                "flops_per_token": c.flops_per_token,
                "seq_len": cfg.seq_len,
                "k": {
                    "6ND_total": 6.0 * c.total,
                    "6ND_nonembed": 6.0 * c.non_embedding,
                    "trainer_flops": c.flops_per_token,
                },
            }
        )
    return out


def recipe_vocab(recipe: dict) -> int | None:
    tok = ((recipe or {}).get("data") or {}).get("tokenizer") or {}
    return tok.get("vocab_size")


def run_label(run: dict) -> str:
    """A run's model in a few characters: its preset, else its shape rule and size (`runs-73B`)."""
    if run.get("preset"):
        return str(run["preset"])
    n = float(run.get("params") or run.get("N") or 0)
    size = next((f"{n / f:.3g}{u}" for f, u in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")) if n >= f), f"{n:.3g}")
    return f"{run.get('shape_rule') or 'model'}-{size}"


def describe_run_model(run: dict) -> str:
    """`preset NAME` or the designed shape, for the printed plan and the views that show it."""
    if run.get("preset"):
        return f"preset {run['preset']}"
    m = run.get("model") or {}
    la = m.get("mla")
    heads = (
        f"{m.get('n_heads')} heads of latent attention (kv rank {la['kv_lora_rank']}, q rank {la['q_lora_rank']})"
        if la
        else f"{m.get('n_heads')} heads ({m.get('n_kv_heads')} kv)"
    )
    mtp = f", {m['mtp_depth']} MTP module(s)" if m.get("mtp_depth") else ""
    how = f"designed ({run['shape_rule']})" if run.get("shape_rule") else "given"
    return f"{how}: d_model {m.get('d_model')}, {m.get('n_layers')} layers, {heads}, d_ff {m.get('d_ff')}{mtp}"
