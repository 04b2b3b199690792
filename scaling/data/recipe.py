"""The training recipe shared by a fit's runs: what a plan must reproduce for its prediction to hold.

A law fitted on runs trained with one schedule, warmup, weight decay, sequence length and data set
predicts the loss of a run trained the same way. The fit record keeps those settings (read from
each run's resolved config.yaml) so that `plan --emit-config` writes them, and says which settings
varied across the runs (then the most common value is kept and the record warns).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import yaml

from rundir.dotted import get_dotted
from rundir.layout import CONFIG

# The train config's keys a law's prediction depends on (a fit record's `recipe.settings`). Kept here, not read
# off the schema: scaling may not import pretrain (the layers); tests/unit/scaling/test_recipe_keys.py holds
# each to the schema.
RECIPE_KEYS = (
    "optim.lr",
    "optim.weight_decay",
    "optim.beta1",
    "optim.beta2",
    "optim.eps",
    "optim.grad_clip",
    "optim.width_lr_ref",
    "schedule.name",
    "schedule.warmup_steps",
    "schedule.warmup_fraction",
    "schedule.min_lr_ratio",
    "schedule.decay_fraction",
    "schedule.decay_shape",
    "model.seq_len",
    "model.tie_embeddings",
    "model.parametrization",  # under mup, the base shapes the lr was tuned at (docs/mup.md)
    "model.mup_base_width",
    "model.mup_base_head_dim",
    "train.global_batch_size",
    "train.micro_batch_size",
    "train.eval_tokens",
    "train.eval_every_steps",
    "precision",
    "deepspeed.zero_stage",
)
# Settings a law's runs vary on purpose (batch-lr's lr and batch): their spread is expected, not a warning.
# Sweep axes all (the schema's SweepAxis), but not every axis: a spread weight decay is two recipes.
SWEPT = ("optim.lr", "train.global_batch_size", "train.micro_batch_size")


def read_recipe(paths) -> dict | None:
    """{settings: {key: most common value}, varies: [keys], data: section, n_runs} from run dirs."""
    cfgs = []
    for p in paths:
        if not p or not isinstance(p, str):
            continue
        f = Path(p) / CONFIG
        try:
            cfg = yaml.safe_load(f.read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(cfg, dict):
            cfgs.append(cfg)
    if not cfgs:
        return None
    settings, varies = {}, []
    for key in RECIPE_KEYS:
        vals = Counter(json.dumps(get_dotted(c, key), sort_keys=True) for c in cfgs)
        value, _ = vals.most_common(1)[0]
        settings[key] = json.loads(value)
        if len(vals) > 1 and key not in SWEPT:
            varies.append(key)
    shapes = {json.dumps(shape, sort_keys=True) for c in cfgs if (shape := model_shape(c.get("model")))}
    datas = Counter(json.dumps(c.get("data"), sort_keys=True) for c in cfgs if c.get("data") is not None)
    data = json.loads(datas.most_common(1)[0][0]) if datas else None
    if len(datas) > 1:
        varies.append("data")
    return {
        "settings": settings,
        "varies": varies,
        "data": data,
        "n_runs": len(cfgs),
        "models": sorted((json.loads(s) for s in shapes), key=lambda m: (m["d_model"], m["n_layers"])),
    }


SHAPE_KEYS = ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff")


def model_shape(model) -> dict | None:
    """A run's model shape (its resolved config's model section): the family a plan designs in.
    None for an unresolved section (a preset name only)."""
    if not isinstance(model, dict) or not all(
        isinstance(model.get(k), int) for k in ("d_model", "n_layers", "n_heads")
    ):
        return None
    return {k: model.get(k) for k in SHAPE_KEYS} | {"moe": bool(model.get("moe"))}


def recipe_warning(recipe: dict | None) -> str | None:
    if recipe and recipe["varies"]:
        return (
            "the runs differ in " + ", ".join(recipe["varies"]) + ": the law mixes training recipes; "
            "a plan reproduces the most common one"
        )
    return None
