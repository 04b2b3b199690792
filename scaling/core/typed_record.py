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
order they were given in, so a record written from a loaded file is the file again, byte for byte: a
new record's `schema_version` comes last, and a file without one (version 0) is written back without
one (its `schema_version` attribute reads 0, `"schema_version" in rec` is False).

A file of a newer `schema_version` than this code knows is refused (InputError, naming both versions):
a version is bumped only when a known key changes meaning (a key added needs no bump: an older reader
keeps it in `other`), so an older reader cannot read a newer file correctly. `save` writes atomically
(rundir.files.atomic_write_text, as RunSummary's `write`): a reader such as the dashboard never sees
half a file, and a failed write leaves the old file as it was.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from rundir.files import atomic_write_text
from scaling.core.errors import InputError

R = TypeVar("R", bound="TypedRecord")
_MISSING = dataclasses.MISSING


class TypedRecord(MutableMapping[str, Any]):
    """Subclasses are `@dataclasses.dataclass(init=False, eq=False)` with their known keys as fields
    (a field's `metadata={"key": ...}` names a JSON key that is not a valid or free attribute name)."""

    SCHEMA_VERSION: ClassVar[int] = 1
    REQUIRED: ClassVar[tuple[str, ...]] = ()  # keys a record cannot lack (checked by `check`)
    # declarations only (no class attributes): @dataclass sets the fields on each subclass, _attrs the cache
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    _attrs_cache: ClassVar[dict[str, str]]

    schema_version: int
    other: dict[str, Any]  # keys this version does not know, kept as they are
    _order: dict[str, None]  # the keys given, in order (an insertion-ordered set)
    _unversioned: bool  # read from a file without schema_version

    def __init__(self, data: Mapping[str, Any] | None = None, /, **kw: Any) -> None:
        """`Record(d)` and `Record(key=value, ...)`, as `dict(...)`; the current schema version unless given."""
        object.__setattr__(self, "_order", {})
        object.__setattr__(self, "_unversioned", False)  # read from a file without schema_version
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
            cls._attrs_cache = cached
        return cached

    @classmethod
    def known_keys(cls) -> tuple[str, ...]:
        return (*cls._attrs(), "schema_version")

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name == "schema_version":
            object.__setattr__(self, "_unversioned", False)
        key = next((k for k, a in self._attrs().items() if a == name), None)
        if key is not None:
            self._order[key] = None

    # ------------------------------------------------------------------ dict access
    def __getitem__(self, key: str) -> Any:
        if key == "schema_version" and not self._unversioned:
            return self.schema_version
        if key in self._order:
            attr = self._attrs().get(key)
            return getattr(self, attr) if attr else self.other[key]
        raise KeyError(key)

    def __setitem__(self, key: str, value: Any) -> None:
        attr = self._attrs().get(key)
        if key == "schema_version":
            object.__setattr__(self, "schema_version", value)
            object.__setattr__(self, "_unversioned", False)
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
        default = f.default_factory() if f.default_factory is not _MISSING else f.default
        object.__setattr__(self, attr, None if default is _MISSING else default)

    def __iter__(self) -> Iterator[str]:
        yield from list(self._order)
        if "schema_version" not in self._order and not self._unversioned:
            yield "schema_version"

    def __len__(self) -> int:
        return len(self._order) + ("schema_version" not in self._order and not self._unversioned)

    def __contains__(self, key: object) -> bool:
        return (key == "schema_version" and not self._unversioned) or key in self._order

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_dict()!r})"

    def __copy__(self: R) -> R:
        copy = type(self)(self.to_dict())
        object.__setattr__(copy, "schema_version", self.schema_version)
        object.__setattr__(copy, "_unversioned", self._unversioned)  # a version-0 file's record stays so
        return copy

    def copy(self: R) -> R:
        """A shallow copy of the same type and version (as `dict.copy`)."""
        return self.__copy__()

    # ------------------------------------------------------------------ JSON form
    def to_dict(self) -> dict[str, Any]:
        """The JSON object: the keys in the order given (`schema_version` last unless given in place)."""
        return {k: self[k] for k in self}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def save(self: R, path: str | Path) -> Path:
        """Write `to_json()` atomically (a temporary file renamed over `path`), its folder made if needed."""
        p = Path(path)
        atomic_write_text(p, self.to_json() + "\n")
        return p

    @classmethod
    def from_dict(cls: type[R], d: Mapping[str, Any]) -> R:
        """Tolerant of older files: unknown keys kept in `other`, no `schema_version` means 0 (and is
        written back without one). A newer or malformed `schema_version` is an InputError."""
        version = d.get("schema_version", 0)
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InputError(f"schema_version must be a whole number >= 0 (got {version!r})")
        if version > cls.SCHEMA_VERSION:
            raise InputError(
                f"schema_version {version} is newer than this scalelab reads ({cls.__name__} "
                f"{cls.SCHEMA_VERSION}): read it with the scalelab that wrote it, or upgrade"
            )
        rec = cls(d)
        if "schema_version" not in d:
            object.__setattr__(rec, "schema_version", 0)
            object.__setattr__(rec, "_unversioned", True)
        return rec

    def missing(self) -> list[str]:
        """The REQUIRED keys this record lacks."""
        return [k for k in self.REQUIRED if k not in self]
