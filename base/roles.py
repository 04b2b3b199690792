"""What a config key is for, declared where the key is: `Annotated[type, RESUMABLE, ...]` on a field of a
typed config (pretrain/config/schema.py, models/config.py, pretrain/data/config.py). The lists the
trainer and the sweeps used to keep by hand are read off the schema (`keys_with`):

- RESUMABLE: may change between attempts of one run without changing what it computes (logging,
  checkpoint cadence, threads, W&B, names): a resume accepts a new value (pretrain.cli).
- BRANCH: a branch (`train.init_from`) must match its parent here; on a section, every key in it
  (pretrain.config.init_from).
- BOOKKEEPING: how a run is written or labelled, not what it computes: exempt from a BRANCH
  section's comparison (the vocabulary filled in from the tokenizer, a preset's name, how prepared
  data is sharded).
- PATH: a folder, compared as the folder it names (a symlink or a relative path is the same one).
- SweepAxis(label): a key sweeps vary, named in run names by `label` and its value (`lr3e-3`; an
  empty label: the value alone) (launch.sweep.naming).

A role on a section field applies to every key under it. The roles are pydantic field metadata only:
they change no validation, no JSON schema and no generated config reference.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from types import UnionType

from pydantic import BaseModel


@dataclass(frozen=True)
class Role:
    name: str


RESUMABLE = Role("resumable")
BRANCH = Role("branch")
BOOKKEEPING = Role("bookkeeping")
PATH = Role("path")


@dataclass(frozen=True)
class SweepAxis:
    label: str


def _submodels(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, UnionType):
        return [m for a in typing.get_args(annotation) for m in _submodels(a)]
    return []


def declared(model: type[BaseModel], kind: type, prefix: str = "") -> dict[str, list]:
    """Every dotted key (sections included) of `model` whose field metadata holds `kind` objects -> them."""
    out: dict[str, list] = {}
    for name, field in model.model_fields.items():
        key = prefix + name
        found = [m for m in field.metadata if isinstance(m, kind)]
        if found:
            out[key] = found
        for sub in _submodels(field.annotation):
            out.update(declared(sub, kind, key + "."))
    return out


def roles(model: type[BaseModel]) -> dict[str, frozenset[Role]]:
    """Every dotted key (sections included) of `model` that declares a role -> its roles."""
    return {k: frozenset(v) for k, v in declared(model, Role).items()}


def axis_labels(model: type[BaseModel]) -> dict[str, str]:
    """Every dotted key of `model` declared a sweep axis -> its label in run names."""
    return {k: v[0].label for k, v in declared(model, SweepAxis).items()}


def keys_with(model: type[BaseModel], role: Role) -> frozenset[str]:
    """The dotted keys (or sections) of `model` declaring `role`."""
    return frozenset(k for k, r in roles(model).items() if role in r)


def covered(key: str, keys: typing.Iterable[str]) -> bool:
    """Whether `key` is one of `keys` or lies in one of them (a section)."""
    return any(key == k or key.startswith(k + ".") for k in keys)
