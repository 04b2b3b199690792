"""Dotted keys (`optim.name`, `train.init_from`) read from nested dicts: a resolved config, a summary.

The one reader every layer uses on a config it did not validate (an old run's config.yaml, a table's
recipe): a missing section, a missing key and a section that is not a mapping all read as absent,
never as an exception."""

from __future__ import annotations

from typing import Any


def has_dotted(d: Any, dotted: str) -> bool:
    """Whether every part of `dotted` is present (a key set to null is present)."""
    node = d
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def get_dotted(d: Any, dotted: str, default: Any = None) -> Any:
    """The value at `dotted`, or `default` when any part is absent (`has_dotted` tells the two apart
    where a null value means something)."""
    node = d
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node
