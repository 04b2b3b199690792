"""The train config's keys by role, read off the schema's field metadata (base/roles.py): what a resume
may change, what a branch must share with its parent, and the one flatten-and-compare both use."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from base.roles import BOOKKEEPING, BRANCH, PATH, RESUMABLE, axis_labels, covered, keys_with
from pretrain.config.schema import TrainConfig


@lru_cache(maxsize=1)
def resumable_keys() -> frozenset[str]:
    """Keys (and sections) that may change between attempts of one run without changing what it computes."""
    return keys_with(TrainConfig, RESUMABLE)


@lru_cache(maxsize=1)
def branch_keys() -> frozenset[str]:
    """Keys (and sections) a branch (train.init_from) must share with its parent."""
    return keys_with(TrainConfig, BRANCH)


@lru_cache(maxsize=1)
def bookkeeping_keys() -> frozenset[str]:
    """Keys that do not change the trajectory: exempt inside a branch's sections."""
    return keys_with(TrainConfig, BOOKKEEPING)


@lru_cache(maxsize=1)
def path_keys() -> frozenset[str]:
    """Keys naming a folder: compared as the folder they name."""
    return keys_with(TrainConfig, PATH)


@lru_cache(maxsize=1)
def sweep_axis_labels() -> dict[str, str]:
    """Keys sweeps vary -> their label in run names (`optim.lr` -> `lr`, `train.tokens` -> `d`)."""
    return axis_labels(TrainConfig)


def must_match_on_branch(key: str) -> bool:
    return covered(key, branch_keys()) and not covered(key, bookkeeping_keys())


def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    """A nested config as {dotted key: value}; an empty section is one key whose value is {}."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def changed(old: dict, new: dict, keep=lambda key: True) -> list[tuple[str, Any, Any]]:
    """(key, old value, new value) of every dotted key that differs between two nested configs, sorted,
    of the keys `keep(key)` accepts."""
    a, b = flatten(old), flatten(new)
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if keep(k) and a.get(k) != b.get(k)]
