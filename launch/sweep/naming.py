"""Readable, stable run names (`n200k-d1m`, `c1e13-n400k`, `n200k-b16-lr3e-3-s1`) and ids.

A name is built from the run's own value on every axis, never from positions in the expansion
or from how many values another axis has, so adding a budget, a seed or a second value to a
one-value axis never renames existing runs. The id is a hash of the resolved config minus
bookkeeping keys (the schema's RESUMABLE keys, pretrain.config.roles: W&B, logging and checkpoint
cadence, in-loop evaluation, names, ...), so it changes only when what a run computes changes. Only values that differ
from the schema's defaults are hashed (`exclude_defaults`), so a new config key added later
never renumbers runs.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

_SI = [(1e12, "t"), (1e9, "g"), (1e6, "m"), (1e3, "k")]


def fmt_num(x: float | int) -> str:
    """1e6 -> 1m, 2500000 -> 2.5m, 0.003 -> 3e-3, 16 -> 16, 1e13 -> 1e13 (budgets use fmt_sci)."""
    if isinstance(x, bool):
        return str(x).lower()
    x = float(x)
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) >= 1000:
        for scale, suffix in _SI:
            if abs(x) >= scale:
                return f"{x / scale:.3g}{suffix}"
    if x.is_integer():
        return str(int(x))
    if abs(x) < 0.1:
        return fmt_sci(x)
    return f"{x:.3g}"


def fmt_sci(x: float) -> str:
    """1e13 -> 1e13, 3e12 -> 3e12, 0.003 -> 3e-3, 1.5e-4 -> 1.5e-4."""
    m, e = f"{float(x):.3e}".split("e")
    m = m.rstrip("0").rstrip(".")
    return f"{m}e{int(e)}"


def model_label(value: Any) -> str:
    """A model axis value: preset name as is, a mapping by its preset or shape."""
    if isinstance(value, str):
        return value.removesuffix(".yaml").rsplit("/", 1)[-1]
    if isinstance(value, dict):
        if "preset" in value and len(value) == 1:
            return str(value["preset"])
        parts = [str(value["preset"])] if "preset" in value else []
        for k in ("d_model", "n_layers"):
            if k in value:
                parts.append(f"{aliases().get('model.' + k, k)}{value[k]}")
        moe = value.get("moe")
        if isinstance(moe, dict):
            parts.append(f"e{moe.get('num_experts', 8)}k{moe.get('top_k', 2)}")
            # Only what is given, so MoE runs named before keep their names.
            if moe.get("num_shared_experts"):
                parts.append(f"sh{moe['num_shared_experts']}")
            if moe.get("router"):
                parts.append(str(moe["router"]))
            if "capacity_factor" in moe and moe["capacity_factor"] is None:
                parts.append("dropless")
        return "-".join(parts) or "m" + short_hash(value, 6)
    return str(value)


def axis_label(key: str, value: Any) -> str:
    if key == "model":
        return model_label(value)
    if key == "model.moe":
        return "dense" if value is None else model_label({"moe": value if isinstance(value, dict) else {}})
    prefix = aliases().get(key, key.rsplit(".", 1)[-1])
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = fmt_num(value)
    elif value is None:
        text = "none"
    elif isinstance(value, (dict, list)):
        text = short_hash(value, 6)
    else:
        text = str(value)
    return sanitize(f"{prefix}{text}" if prefix and not text.startswith(prefix) else text)


def sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "run"


def short_hash(obj: Any, n: int = 10) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:n]


def aliases() -> dict[str, str]:
    """Short prefixes of the common axes in run names (`lr3e-3`, `d1m`; "": the value alone), declared
    on the schema's fields (SweepAxis, base/roles.py); other keys use their last segment."""
    from pretrain.config.roles import sweep_axis_labels  # deferred: imports pydantic and the schema

    return sweep_axis_labels()


def bookkeeping() -> tuple[str, ...]:
    """Keys that do not change what a run computes: exactly those a run may change between attempts
    (the schema's RESUMABLE keys), so a run the sweep calls the same is one the trainer resumes."""
    from pretrain.config.roles import resumable_keys  # deferred: imports pydantic and the schema

    return tuple(sorted(resumable_keys()))


def config_id(cfg) -> str:
    """Hash of what a run computes: the validated TrainConfig's non-default values, minus
    bookkeeping keys (validation makes types canonical: 1e6 and 1000000 tokens hash alike)."""
    exclude: dict = {}
    for key in bookkeeping():  # nested {field: {sub: True}} at any depth (data.tokenizer.x too)
        node, parts = exclude, key.split(".")
        for part in parts[:-1]:
            if node.get(part) is True:
                break
            node = node.setdefault(part, {})
        else:
            node[parts[-1]] = True
    text = cfg.model_dump_json(exclude_defaults=True, exclude=exclude)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _canon(x: Any) -> Any:
    """Floats that are integers compare equal to ints (1e6 vs 1000000 in YAML)."""
    if isinstance(x, dict):
        return {k: _canon(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_canon(v) for v in x]
    if isinstance(x, float) and math.isfinite(x) and x.is_integer():
        return int(x)
    return x
