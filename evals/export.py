"""`scalelab export hf`: a run directory or checkpoint -> a Hugging Face `transformers` directory.

The run is read here (`rundir.weights.load_run`: model config, weights, tokenizer); the
conversion itself is `models.hf_export`, which knows nothing of run directories.
"""

from __future__ import annotations

import json
from pathlib import Path

EXPORT_META = "scalelab_export.json"  # written next to the model: which checkpoint, step and tokens


def export_checkpoint(path: str | Path, out_dir: str | Path) -> Path:
    """A run directory (its newest complete checkpoint) or `checkpoints/step_N` -> transformers dir."""
    from models.hf_export import export_model, hf_config, moe_target  # deferred: imports torch
    from rundir.weights import load_run  # deferred: imports torch

    loaded = load_run(path)
    cfg = loaded.model_config
    if cfg.moe is not None:
        moe_target(cfg)  # refuse unsupported routers before writing anything
    out = export_model(loaded.model, cfg, loaded.tokenizer, loaded.eot_id, out_dir)
    (out / EXPORT_META).write_text(
        json.dumps(
            {
                "checkpoint": str(loaded.checkpoint),
                "step": loaded.step,
                "tokens": loaded.tokens,
                "architecture": type(hf_config(cfg, loaded.eot_id)).__name__.replace("Config", "ForCausalLM"),
            },
            indent=2,
        )
        + "\n"
    )
    return out
