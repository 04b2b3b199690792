"""Generate the config reference (docs/config-reference.md) from the typed configs, so it is written once."""

from __future__ import annotations

import typing
from pathlib import Path
from types import UnionType

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from pretrain.config.schema import TrainConfig


def _submodel(annotation) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, UnionType):
        for a in typing.get_args(annotation):
            m = _submodel(a)
            if m is not None:
                return m
    return None


def _type_name(annotation) -> str:
    text = getattr(annotation, "__name__", None) if not typing.get_args(annotation) else None
    return text or str(annotation).replace("typing.", "")


def rows(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    out = []
    for name, field in model.model_fields.items():
        key = prefix + name
        sub = _submodel(field.annotation)
        if sub is not None and sub is not BaseModel:
            if field.description:
                out.append((key, "section", "", field.description))
            out.extend(rows(sub, key + "."))
            continue
        if field.default is not PydanticUndefined:
            default = repr(field.default)
        elif field.default_factory is not None:
            default = repr(field.default_factory())  # type: ignore[call-arg]  # none of ours takes the data
        else:
            default = "required"
        out.append((key, _type_name(field.annotation), default, field.description or ""))
    return out


def reference_markdown(model: type[BaseModel] = TrainConfig) -> str:
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, typ, default, desc in rows(model):
        esc = [t.replace("|", "\\|") for t in (typ, default, desc)]
        lines.append(f"| `{key}` | {esc[0]} | `{esc[1]}` | {esc[2]} |")
    return "\n".join(lines)


START, END = "<!-- config-reference:start -->", "<!-- config-reference:end -->"


def update_readme(path) -> bool:
    """Rewrite the config reference block of a page (docs/config-reference.md); returns True when it changed."""

    p = Path(path)
    text = p.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{reference_markdown()}\n{END}{tail}"
    if new != text:
        p.write_text(new)
    return new != text


if __name__ == "__main__":
    import sys

    update_readme(sys.argv[1] if len(sys.argv) > 1 else "docs/config-reference.md")
