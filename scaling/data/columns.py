"""Which table column plays which role: `--col ROLE=COLUMN` items parsed, then the roles resolved
against a table's columns. Every fit reading a table (loss laws, MoE laws, accuracy, task loss,
lr annealing) and `scalelab predict` go through these two functions, so a wrong --col reads the same
everywhere: it names the item and the roles allowed (exit 2)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scaling.core.errors import InputError


def parse_columns(items: Iterable[str] | None, roles: Iterable[str]) -> dict[str, str]:
    """['N=params', 'loss=val'] -> {'N': 'params', 'loss': 'val'} (a role given twice: the last wins);
    an item without '=' or with a role outside `roles` is an InputError naming the allowed roles."""
    roles = tuple(roles)
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise InputError(f"--col '{item}' must look like role=column (roles: {', '.join(roles)})")
        role, col = item.split("=", 1)
        role = role.strip()
        if role not in roles:
            raise InputError(f"--col '{item}': unknown role '{role}' (roles: {', '.join(roles)})")
        out[role] = col.strip()
    return out


def resolve_columns(
    raw,
    overrides: Mapping[str, str],
    roles: Iterable[str],
    aliases: Mapping[str, tuple[str, ...]],
    preferred: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """role -> column of the table `raw`, in this order: the --col `overrides` (each must be a column);
    `preferred` (role -> column name, case-insensitive, taken when the table has it, e.g. the N column
    of the --n-kind asked for); then each remaining role's own name or first alias (case-insensitive)
    that no other role took. Roles the table lacks are left out: the fit's `validate` names them."""
    lower = {str(c).strip().lower(): c for c in raw.columns}
    mapping: dict[str, str] = {}
    for role, col in overrides.items():
        if col not in raw.columns:
            raise InputError(f"--col {role}={col}: no column '{col}' (columns: {', '.join(map(str, raw.columns))})")
        mapping[role] = col
    for role, name in (preferred or {}).items():
        if role not in mapping and name in lower:
            mapping[role] = lower[name]
    used = set(mapping.values())
    for role in roles:
        if role in mapping:
            continue
        for alias in (role.lower(),) + tuple(aliases.get(role, ())):
            found = lower.get(alias)
            if found is not None and found not in used:
                mapping[role] = found
                used.add(found)
                break
    return mapping
