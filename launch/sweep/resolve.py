"""A sweep point's overrides -> its validated TrainConfig (the base YAML read once), the vocabulary it will train
with, and its FLOPs per token under an IsoFLOP convention. Shared by every kind of sweep expansion."""

from __future__ import annotations

import json
from typing import Any

from launch.sweep.spec import SweepSpec
from pretrain.config.loader import apply_parsed, build_train_raw, check_trainer_builds, validate_train
from pretrain.data.mixture import planned_vocab
from pretrain.errors import ConfigError


def vocab_for(cfg) -> int:
    if cfg.model.vocab_size:
        return cfg.model.vocab_size
    if cfg.data.mixture is not None:
        return planned_vocab(cfg.data) or cfg.data.tokenizer.vocab_size
    tok = cfg.data.tokenizer
    return 50257 if tok.kind == "gpt2" else tok.vocab_size


class ConfigBuilder:
    """Resolves (overrides) -> validated TrainConfig, caching the base YAML read."""

    def __init__(self, spec: SweepSpec):

        self.spec = spec
        base = spec.base_path()
        if not base.exists():
            raise ConfigError(f"sweep spec: base config not found: {spec.base}")
        self.base_raw = build_train_raw(base, [])

    def resolve(self, items: list[tuple[str, Any]], label: str):

        try:
            raw = apply_values(self.base_raw, list(self.spec.set.items()) + items)
            cfg = validate_train(raw)
            check_trainer_builds(cfg)  # a sweep trains its runs: refuse what the trainer does not build
            return raw, cfg
        except ConfigError as exc:
            raise ConfigError(f"run {label}: {exc}") from None


def apply_values(raw: dict, items: list[tuple[str, Any]]) -> dict:
    """`pretrain.config.loader.apply_overrides` for already-parsed values (no YAML round trip:
    planning 1,000 runs must stay well under a second). Same rules: whole sections (presets)
    first, then dotted keys on top."""

    cfg = json.loads(json.dumps(raw))
    return apply_parsed(cfg, [(key.split("."), json.loads(json.dumps(value))) for key, value in items])


def flops_per_token(c, compute: str) -> float:
    """FLOPs per token of a model (`models.accounting.model_counts`) under an IsoFLOP convention: every
    run of a budget spends it in that currency."""
    return {"6ND_total": 6.0 * c.total, "6ND_nonembed": 6.0 * c.non_embedding}.get(compute, c.flops_per_token)
