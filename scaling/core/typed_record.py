"""A typed, versioned JSON record that still reads like the dict it was: the base of the fit record
(scaling.fits.record.FitRecord) and the plan (scaling.planning.record.PlanRecord).

The pattern is RunSummary's (rundir/summary.py): the top-level keys a record knows are dataclass
fields (typed, named once, so a renamed key fails where it is read by a type checker and by
attribute access), keys it does not know are kept as they are in `other`, and a file written before
`schema_version` existed reads as version 0. Unlike RunSummary a record keeps dict access
(`rec["key"]`, `.get`, `in`, iteration, `dict(rec)`) for the notebooks and callers written against the
dicts, for one release; new code reads the attributes.

A key is present when it was given (a None value included); an absent known key reads as the field's
default through its attribute and raises KeyError through `rec["key"]`, as a dict would. Keys keep the
order they were given in, so a record written from a loaded file is the file again (a new record's
`schema_version` comes last).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="TypedRecord")
_MISSING = dataclasses.MISSING


class TypedRecord(MutableMapping):
    """Subclasses are `@dataclasses.dataclass(init=False, eq=False)` with their known keys as fields
    (a field's `metadata={"key": ...}` names a JSON key that is not a valid or free attribute name)."""

    SCHEMA_VERSION: ClassVar[int] = 1
    REQUIRED: ClassVar[tuple[str, ...]] = ()  # keys a record cannot lack (checked by `check`)

    schema_version: int
    other: dict[str, Any]  # keys this version does not know, kept as they are

    def __init__(self, data: Mapping[str, Any] | None = None, /, **kw: Any) -> None:
        """`Record(d)` and `Record(key=value, ...)`, as `dict(...)`; the current schema version unless given."""
        object.__setattr__(self, "_order", {})
        for f in dataclasses.fields(self):
            if f.default is not _MISSING:
                object.__setattr__(self, f.name, f.default)
            elif f.default_factory is not _MISSING:
                object.__setattr__(self, f.name, f.default_factory())
            else:
                object.__setattr__(self, f.name, None)
        object.__setattr__(self, "other", {})
        object.__setattr__(self, "schema_version", self.SCHEMA_VERSION)
        for k, v in {**(data or {}), **kw}.items():
            self[k] = v

    # ------------------------------------------------------------------ keys <-> fields
    @classmethod
    def _attrs(cls) -> dict[str, str]:
        """JSON key -> attribute name of every known key (schema_version and other excluded)."""
        cached = cls.__dict__.get("_attrs_cache")
        if cached is None:
            cached = {
                f.metadata.get("key", f.name): f.name
                for f in dataclasses.fields(cls)
                if f.name not in ("schema_version", "other")
            }
            cls._attrs_cache = cached  # type: ignore[attr-defined]
        return cached

    @classmethod
    def known_keys(cls) -> tuple[str, ...]:
        return (*cls._attrs(), "schema_version")

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        key = next((k for k, a in self._attrs().items() if a == name), None)
        if key is not None:
            self._order[key] = None

    # ------------------------------------------------------------------ dict access
    def __getitem__(self, key: str) -> Any:
        if key == "schema_version":
            return self.schema_version
        if key in self._order:
            attr = self._attrs().get(key)
            return getattr(self, attr) if attr else self.other[key]
        raise KeyError(key)

    def __setitem__(self, key: str, value: Any) -> None:
        attr = self._attrs().get(key)
        if key == "schema_version":
            object.__setattr__(self, "schema_version", value)
        elif attr:
            object.__setattr__(self, attr, value)
        else:
            self.other[key] = value
        self._order[key] = None

    def __delitem__(self, key: str) -> None:
        if key == "schema_version":
            raise KeyError("schema_version cannot be deleted: every record has one")
        if key not in self._order:
            raise KeyError(key)
        del self._order[key]
        attr = self._attrs().get(key)
        if attr is None:
            del self.other[key]
            return
        f = next(f for f in dataclasses.fields(self) if f.name == attr)
        default = f.default_factory() if f.default_factory is not _MISSING else f.default  # type: ignore[misc]
        object.__setattr__(self, attr, None if default is _MISSING else default)

    def __iter__(self) -> Iterator[str]:
        yield from list(self._order)
        if "schema_version" not in self._order:
            yield "schema_version"

    def __len__(self) -> int:
        return len(self._order) + ("schema_version" not in self._order)

    def __contains__(self, key: object) -> bool:
        return key == "schema_version" or key in self._order

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_dict()!r})"

    def __copy__(self: R) -> R:
        return type(self).from_dict(self.to_dict())

    def copy(self: R) -> R:
        """A shallow copy of the same type and version (as `dict.copy`)."""
        return self.__copy__()

    # ------------------------------------------------------------------ JSON form
    def to_dict(self) -> dict[str, Any]:
        """The JSON object: the keys in the order given (`schema_version` last unless given in place)."""
        return {k: self[k] for k in self}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls: type[R], d: Mapping[str, Any]) -> R:
        """Tolerant of older files: unknown keys kept in `other`, no `schema_version` means 0."""
        rec = cls(d)
        if "schema_version" not in d:
            object.__setattr__(rec, "schema_version", 0)
        return rec

    def missing(self) -> list[str]:
        """The REQUIRED keys this record lacks."""
        return [k for k in self.REQUIRED if k not in self]
